#include "launcher/check/preflight.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "launcher/frontend/cli.h"
#include "launcher/sys/device_probe.h"
#include "tests/support/fake_ld_cache.h"
#include "tests/support/frontend_fakes.h"

namespace gculaunch {
namespace {

using testing::FakeFileAccess;
using testing::TempDir;

class FakeRunner : public CommandRunner {
 public:
  CommandOutcome next;
  mutable int calls = 0;
  mutable std::vector<std::string> argv;
  mutable EnvMap env;
  mutable double timeout_s = 0;

  CommandOutcome Run(const std::vector<std::string>& a, const EnvMap& e, double t) const override {
    ++calls;
    argv = a;
    env = e;
    timeout_s = t;
    return next;
  }
  // The probe's report: one line (the literals below are wrapped for reading).
  void Says(std::string json) {
    std::replace(json.begin(), json.end(), '\n', ' ');
    next = {};
    next.out = "noise from a sitecustomize\nGCULAUNCH_PROBE " + json + "\n";
  }
};

class FakeNet : public NetworkProbe {
 public:
  Result<std::vector<std::string>> resolved = std::vector<std::string>{"127.0.0.1"};
  Status listen = OkStatus();
  ConnectOutcome connect;
  mutable std::string connected_to;

  Result<std::vector<std::string>> Resolve(const std::string&) const override { return resolved; }
  Status CanListen(int) const override { return listen; }
  ConnectOutcome Connect(const std::string& host, int port, double) const override {
    connected_to = host + ":" + std::to_string(port);
    return connect;
  }
};

constexpr const char* kGcuReady =
    R"({"python": "3.8.10", "torch": "1.10.0", "module": "1.10.0+2.5.136", "module_devices": 8,
        "backend_ok": true})";

struct Fixture {
  TempDir root;
  FileSystemDeviceProbe probe{root.path()};
  FakeFileAccess files;
  FakeRunner runner;
  FakeNet net;
  EnvMap env{{"PATH", "/usr/bin:/bin"}, {"HOME", "/home/u"}};

  Fixture() {
    files.executables["python3"] = "/usr/bin/python3";
    files.executables["/usr/bin/python3"] = "/usr/bin/python3";
    runner.Says(kGcuReady);
  }

  void Cards(int n) {
    for (int i = 0; i < n; ++i) root.Write("dev/gcu" + std::to_string(i));
    root.Write("dev/gcuctl");
  }
  void GcuHost(int cards = 8) {
    Cards(cards);
    root.Write("sys/module/enflame/version", "1.2.3\n");
    root.Write("usr/lib/libeccl.so.1");
  }

  LaunchSpec Spec(std::vector<std::string> args) {
    auto cli = ParseCli(args, env, CliParseMode{.script_optional = true});
    if (!cli.ok()) FAIL(cli.error().Format());
    CliOptions options = cli->options;
    options.dry_run = true;
    if (options.script.empty()) options.script = "-";
    auto spec = MakeLaunchSpec(options, env, probe, files);
    if (!spec.ok()) FAIL(spec.error().Format());
    return std::move(*spec);
  }

  CheckReport Run(const std::vector<std::string>& args) {
    PreflightSettings settings;
    settings.interpreter_source = "python3 on PATH";
    return RunPreflight(Spec(args), env, {probe, files, runner, net}, settings);
  }
};

CheckItem Item(const CheckReport& report, const std::string& name) {
  for (const CheckItem& item : report.items) {
    if (item.name == name) return item;
  }
  FAIL("no check named " << name << " in:\n" << RenderCheckText(report));
  return {};
}

bool Has(const CheckReport& report, const std::string& name) {
  for (const CheckItem& item : report.items) {
    if (item.name == name) return true;
  }
  return false;
}

std::vector<std::string> Names(const CheckReport& report) {
  std::vector<std::string> names;
  for (const CheckItem& item : report.items) names.push_back(item.name);
  return names;
}

TEST_CASE("preflight: a ready 8-card GCU node passes every check", "[preflight]") {
  Fixture f;
  f.GcuHost();
  const CheckReport report = f.Run({"--device", "gcu", "--nproc-per-node", "8"});
  INFO(RenderCheckText(report));
  CHECK(report.Failed() == 0);
  CHECK(report.Warnings() == 0);
  CHECK(Names(report) == std::vector<std::string>{"interpreter", "cards", "driver", "library",
                                                  "torch", "vendor-module", "backend",
                                                  "master-addr", "master-port"});
  CHECK(Item(report, "interpreter").evidence == "/usr/bin/python3 (python3 on PATH)");
  CHECK(Item(report, "cards").evidence == "8 device files /dev/gcu0 ... /dev/gcu7 for 8 ranks");
  CHECK(Item(report, "driver").evidence == "/sys/module/enflame present (version 1.2.3)");
  CHECK(Item(report, "library").evidence ==
        "libeccl.so.1 in /usr/lib (a default directory, not in ld.so.cache; ldconfig adds it)");
  CHECK(Item(report, "torch").evidence ==
        "torch 1.10.0 (Python 3.8.10); the ranks get NCCL_ASYNC_ERROR_HANDLING=1 unless set, as "
        "this torch's torchrun does");
  CHECK(Item(report, "vendor-module").evidence ==
        "torch_gcu 1.10.0+2.5.136 imported; device_count() = 8");
  CHECK(Item(report, "backend").evidence ==
        "torch.distributed backend 'eccl' is available after importing torch_gcu");
  CHECK(Item(report, "master-addr").evidence == "127.0.0.1 resolves to 127.0.0.1");
  CHECK(Item(report, "master-port").evidence ==
        "port 29500 is free to listen on (this node hosts the store)");
  for (const CheckItem& item : report.items) CHECK(item.fix.empty());
}

TEST_CASE("preflight: the probe runs the job's interpreter with rank 0's environment",
          "[preflight]") {
  Fixture f;
  f.GcuHost();
  f.env.Set("PYTHONPATH", "/opt/project");
  const CheckReport report =
      f.Run({"--device", "gcu", "--nproc-per-node", "8", "--env", "ECCL_DEBUG=INFO"});
  REQUIRE(f.runner.calls == 1);
  CHECK(f.runner.argv == std::vector<std::string>{"/usr/bin/python3", "-c",
                                                  PythonProbeSourceForTest(), "eccl", "torch_gcu"});
  CHECK(f.runner.timeout_s == 20);
  CHECK(f.runner.env.GetOr("TOPS_VISIBLE_DEVICES", "") == "0,1,2,3,4,5,6,7");
  CHECK(f.runner.env.GetOr("RANK", "") == "0");
  CHECK(f.runner.env.GetOr("LOCAL_RANK", "") == "0");
  CHECK(f.runner.env.GetOr("ECCL_DEBUG", "") == "INFO");
  CHECK(f.runner.env.GetOr("ECCL_MAX_NCHANNELS", "") == "2");
  CHECK(f.runner.env.GetOr("PYTHONPATH", "") == "/opt/project");
  CHECK(f.runner.env.GetOr("HOME", "") == "/home/u");
}

TEST_CASE("preflight: Invalid backend 'eccl' is the backend check failing", "[preflight]") {
  Fixture f;
  f.GcuHost();
  f.runner.Says(R"({"python": "3.8.10", "torch": "1.10.0", "module": "1.10.0",
                   "backend_error": "ValueError: Invalid backend: 'eccl'"})");
  const CheckReport report = f.Run({"--device", "gcu", "--nproc-per-node", "8"});
  const CheckItem& backend = Item(report, "backend");
  CHECK(backend.status == CheckStatus::kFail);
  CHECK(backend.evidence ==
        "torch.distributed backend 'eccl' is not available after importing torch_gcu: "
        "ValueError: Invalid backend: 'eccl'");
  CHECK(backend.fix ==
        "install the torch_gcu build (and collective library) that registers 'eccl' with "
        "torch.distributed; --python-shim can fall back to gloo meanwhile");
  CHECK(Item(report, "vendor-module").evidence ==
        "torch_gcu 1.10.0 imported (it has no device_count())");
  CHECK(report.Failed() == 1);
}

TEST_CASE("preflight: torch 2.2 and later get the new NCCL error-handling name", "[preflight]") {
  Fixture f;
  f.GcuHost();
  f.runner.Says(R"({"python": "3.11.2", "torch": "2.6.0+cu124", "module": "2.6.0"})");
  const CheckReport report = f.Run({"--device", "gcu", "--nproc-per-node", "8"});
  CHECK(Item(report, "torch").evidence ==
        "torch 2.6.0+cu124 (Python 3.11.2); the ranks get TORCH_NCCL_ASYNC_ERROR_HANDLING=1 "
        "unless set, as this torch's torchrun does");
}

TEST_CASE("preflight: torch_gcu not importable", "[preflight]") {
  Fixture f;
  f.GcuHost();
  f.runner.Says(R"({"python": "3.8.10", "torch": "1.10.0",
                   "module_error": "ModuleNotFoundError: No module named 'torch_gcu'",
                   "backend_error": "ValueError: Invalid backend: 'eccl'"})");
  const CheckReport report = f.Run({"--device", "gcu", "--nproc-per-node", "8"});
  const CheckItem& module = Item(report, "vendor-module");
  CHECK(module.status == CheckStatus::kFail);
  CHECK(module.evidence ==
        "import torch_gcu failed: ModuleNotFoundError: No module named 'torch_gcu'");
  CHECK(module.fix ==
        "install the torch_gcu wheel built for torch 1.10.0 and Python 3.8.10 into "
        "/usr/bin/python3 (pip install torch_gcu-*.whl), or choose its interpreter with --python");
  CHECK(Item(report, "backend").fix ==
        "make torch_gcu importable first (see vendor-module); it registers 'eccl'");
  CHECK(report.Failed() == 2);
}

TEST_CASE("preflight: the vendor module's device count", "[preflight]") {
  Fixture f;
  f.GcuHost();
  SECTION("no cards seen") {
    f.runner.Says(R"({"python": "3.8", "torch": "1.10", "module": "", "module_devices": 0,
                     "backend_ok": true})");
    const CheckItem& module =
        Item(f.Run({"--device", "gcu", "--nproc-per-node", "8"}), "vendor-module");
    CHECK(module.status == CheckStatus::kFail);
    CHECK(module.evidence == "torch_gcu imported; device_count() = 0");
  }
  SECTION("fewer than the ranks") {
    f.runner.Says(R"({"python": "3.8", "torch": "1.10", "module": "", "module_devices": 4,
                     "backend_ok": true})");
    const CheckItem& module =
        Item(f.Run({"--device", "gcu", "--nproc-per-node", "8"}), "vendor-module");
    CHECK(module.status == CheckStatus::kWarn);
    CHECK(module.fix == "use --nproc-per-node 4 for one rank per card");
  }
}

TEST_CASE("preflight: cards found vs ranks asked for", "[preflight]") {
  Fixture f;
  SECTION("no device files") {
    const CheckItem& cards = Item(f.Run({"--device", "gcu", "--nproc-per-node", "8"}), "cards");
    CHECK(cards.status == CheckStatus::kFail);
    CHECK(cards.evidence == "no /dev/gcuN device files found for 8 ranks");
    CHECK(cards.fix ==
          "check that the enflame-gcu driver is loaded and, in a container, that the cards are "
          "mounted; or use --device cpu");
  }
  SECTION("one rank on an 8-card node: only card 0 is busy") {
    f.Cards(8);
    const CheckItem& cards = Item(f.Run({"--device", "gcu"}), "cards");
    CHECK(cards.status == CheckStatus::kWarn);
    CHECK(cards.evidence == "1 rank for 8 device files /dev/gcu0 ... /dev/gcu7: 7 cards stay idle");
    CHECK(cards.fix == "use --nproc-per-node 8 (or auto) for one rank per card");
  }
  SECTION("more ranks than cards share them") {
    f.Cards(2);
    const CheckItem& cards = Item(f.Run({"--device", "gcu", "--nproc-per-node", "4"}), "cards");
    CHECK(cards.status == CheckStatus::kWarn);
    CHECK(cards.evidence ==
          "4 ranks on 2 device files /dev/gcu0 ... /dev/gcu1: ranks share cards round-robin");
  }
  SECTION("--bind rank needs a card per rank") {
    f.Cards(2);
    const CheckItem& cards =
        Item(f.Run({"--device", "gcu", "--nproc-per-node", "4", "--bind", "rank"}), "cards");
    CHECK(cards.status == CheckStatus::kFail);
    CHECK(cards.evidence ==
          "--bind rank: 4 ranks need 4 cards, found 2 device files /dev/gcu0 ... /dev/gcu1");
    CHECK(cards.fix == "use --nproc-per-node 2 or fewer, or --bind all");
  }
  SECTION("a pool from the environment") {
    f.env.Set("TOPS_VISIBLE_DEVICES", "4,5,6,7");
    const CheckItem& cards = Item(f.Run({"--device", "gcu", "--nproc-per-node", "4"}), "cards");
    CHECK(cards.status == CheckStatus::kOk);
    CHECK(cards.evidence == "card pool 4,5,6,7 from TOPS_VISIBLE_DEVICES for 4 ranks");
  }
  SECTION("the cpu profile has no cards") {
    const CheckItem& cards = Item(f.Run({"--device", "cpu", "--nproc-per-node", "2"}), "cards");
    CHECK(cards.status == CheckStatus::kOk);
    CHECK(cards.evidence.rfind("device cpu uses no cards; 2 ranks on ", 0) == 0);
  }
}

TEST_CASE("preflight: the driver module", "[preflight]") {
  Fixture f;
  f.Cards(8);
  const CheckReport report = f.Run({"--device", "gcu", "--nproc-per-node", "8"});
  const CheckItem& driver = Item(report, "driver");
  CHECK(driver.status == CheckStatus::kFail);
  CHECK(driver.evidence == "/sys/module/enflame is missing: the enflame driver is not loaded");
  CHECK(driver.fix ==
        "load it on the host (modprobe enflame, or the vendor's installer); a container uses the "
        "host's driver");
  // Profiles that name no driver get no driver check.
  CHECK_FALSE(Has(f.Run({"--device", "cpu"}), "driver"));
}

TEST_CASE("preflight: the collective library", "[preflight]") {
  Fixture f;
  f.Cards(8);
  f.root.Write("sys/module/enflame/version", "1\n");
  SECTION("in LD_LIBRARY_PATH, as the ranks get it") {
    f.root.Write("opt/tops/lib/libeccl.so.2.5.136");
    const CheckItem& library = Item(f.Run({"--device", "gcu", "--nproc-per-node", "8", "--env",
                                           "LD_LIBRARY_PATH=/nowhere:/opt/tops/lib"}),
                                    "library");
    CHECK(library.status == CheckStatus::kOk);
    CHECK(library.evidence == "libeccl.so.2.5.136 in /opt/tops/lib (LD_LIBRARY_PATH)");
  }
  SECTION("in the dynamic linker's cache (new format)") {
    f.root.Write("etc/ld.so.cache",
                 testing::NewLdCache({{testing::kLdFlagsX8664, "libz.so.1", "/usr/lib/libz.so.1"},
                                      {testing::kLdFlagsX8664, "libeccl.so.1",
                                       "/usr/local/tops/lib/libeccl.so.1"}}));
    const CheckItem& library = Item(f.Run({"--device", "gcu", "--nproc-per-node", "8"}), "library");
    CHECK(library.status == CheckStatus::kOk);
    CHECK(library.evidence == "libeccl.so.1 -> /usr/local/tops/lib/libeccl.so.1 (ld.so.cache)");
  }
  SECTION("in the dynamic linker's cache (bullseye's compat format)") {
    f.root.Write(
        "etc/ld.so.cache",
        testing::CompatLdCache({{testing::kLdFlagsX8664, "libeccl.so", "/usr/lib/libeccl.so"}}));
    const CheckItem& library = Item(f.Run({"--device", "gcu", "--nproc-per-node", "8"}), "library");
    CHECK(library.evidence == "libeccl.so -> /usr/lib/libeccl.so (ld.so.cache)");
  }
  SECTION("a library of another architecture does not count") {
    f.root.Write(
        "etc/ld.so.cache",
        testing::NewLdCache({{testing::kLdFlagsI386, "libeccl.so.1", "/usr/lib32/libeccl.so.1"}}));
    const CheckItem& library = Item(f.Run({"--device", "gcu", "--nproc-per-node", "8"}), "library");
#if defined(__x86_64__)
    CHECK(library.status == CheckStatus::kFail);
#endif
  }
  SECTION("nowhere") {
    f.root.Write("usr/lib/libecclx.so.1");  // a prefix match is not the library
    const CheckItem& library = Item(f.Run({"--device", "gcu", "--nproc-per-node", "8"}), "library");
    CHECK(library.status == CheckStatus::kFail);
    CHECK(library.evidence ==
          "no libeccl.so* in LD_LIBRARY_PATH (unset), the dynamic linker's cache or the default "
          "directories (/etc/ld.so.cache cannot be read)");
    CHECK(library.fix ==
          "install the package that provides libeccl.so, then run ldconfig (or add its directory "
          "to LD_LIBRARY_PATH)");
  }
  SECTION("a corrupt cache is named") {
    f.root.Write("etc/ld.so.cache", "garbage");
    const CheckItem& library = Item(f.Run({"--device", "gcu", "--nproc-per-node", "8"}), "library");
    CHECK(library.evidence ==
          "no libeccl.so* in LD_LIBRARY_PATH (unset), the dynamic linker's cache or the default "
          "directories (/etc/ld.so.cache: not an ld.so.cache file (unknown magic))");
  }
}

TEST_CASE("preflight: the interpreter", "[preflight]") {
  Fixture f;
  SECTION("missing: no probe runs") {
    f.files.executables.clear();
    const CheckReport report = f.Run({"--device", "cpu"});
    const CheckItem& interpreter = Item(report, "interpreter");
    CHECK(interpreter.status == CheckStatus::kFail);
    CHECK(interpreter.evidence == "python3 (python3 on PATH): not found on PATH");
    CHECK(interpreter.fix ==
          "install Python 3 with PyTorch, or name the interpreter with --python PATH (or "
          "PYTHON_EXEC)");
    CHECK(f.runner.calls == 0);
    CHECK_FALSE(Has(report, "torch"));
  }
  SECTION("--no-python skips the Python side") {
    f.files.executables["train.sh"] = "/x/train.sh";
    const CheckReport report = f.Run({"--device", "cpu", "--no-python", "train.sh"});
    CHECK(Item(report, "interpreter").status == CheckStatus::kWarn);
    CHECK(f.runner.calls == 0);
  }
}

TEST_CASE("preflight: probe failures", "[preflight]") {
  Fixture f;
  SECTION("torch missing") {
    f.runner.Says(R"({"python": "3.11.7",
                     "torch_error": "ModuleNotFoundError: No module named 'torch'"})");
    const CheckReport report = f.Run({"--device", "cpu"});
    const CheckItem& torch = Item(report, "torch");
    CHECK(torch.status == CheckStatus::kFail);
    CHECK(torch.evidence ==
          "import torch failed in /usr/bin/python3 (Python 3.11.7): ModuleNotFoundError: No "
          "module named 'torch'");
    CHECK(torch.fix ==
          "install PyTorch for this interpreter, or choose the one that has it with --python "
          "PATH (or PYTHON_EXEC)");
    CHECK_FALSE(Has(report, "backend"));
  }
  SECTION("a hang") {
    f.runner.next = {};
    f.runner.next.kind = CommandOutcome::Kind::kTimedOut;
    const CheckItem& probe =
        Item(f.Run({"--device", "gcu", "--nproc-per-node", "1"}), "python-probe");
    CHECK(probe.status == CheckStatus::kFail);
    CHECK(probe.evidence ==
          "/usr/bin/python3 did not finish importing within 20 s (its process group was killed)");
    CHECK(probe.fix ==
          "run /usr/bin/python3 -c 'import torch, torch_gcu' by hand to see why (an import "
          "hangs: driver or device busy?)");
  }
  SECTION("a crash") {
    f.runner.next = {};
    f.runner.next.kind = CommandOutcome::Kind::kSignaled;
    f.runner.next.code = 11;
    f.runner.next.err = "Fatal Python error: Segmentation fault\n\n";
    const CheckItem& probe = Item(f.Run({"--device", "cpu"}), "python-probe");
    CHECK(probe.evidence ==
          "/usr/bin/python3 was killed by signal 11 before reporting: Fatal Python error: "
          "Segmentation fault");
    CHECK(probe.fix == "run /usr/bin/python3 -c 'import torch' by hand to see why");
  }
  SECTION("cannot start") {
    f.runner.next = {};
    f.runner.next.kind = CommandOutcome::Kind::kSpawnFailed;
    f.runner.next.error = "Permission denied";
    const CheckItem& probe = Item(f.Run({"--device", "cpu"}), "python-probe");
    CHECK(probe.evidence == "cannot start /usr/bin/python3: Permission denied");
  }
}

TEST_CASE("preflight: a made-up backend from a profile file", "[preflight]") {
  Fixture f;
  f.files.files["site/madeup.yaml"] = "name: madeup\nbackend: madeup\n";
  f.runner.Says(R"({"python": "3.11.2", "torch": "1.13.0a0",
                   "backend_error": "ValueError: Invalid backend: 'madeup'"})");
  const CheckReport report = f.Run({"--device", "site/madeup.yaml"});
  const CheckItem& backend = Item(report, "backend");
  CHECK(backend.status == CheckStatus::kFail);
  CHECK(backend.evidence ==
        "torch.distributed backend 'madeup' is not available: ValueError: Invalid backend: "
        "'madeup'");
  CHECK(backend.fix ==
        "install the PyTorch extension that registers 'madeup', or use a profile with a built-in "
        "backend (--device cpu: gloo); --python-shim can fall back to gloo");
  CHECK(f.runner.argv.back() == "");  // no vendor module
  CHECK(f.runner.argv[3] == "madeup");
}

TEST_CASE("preflight: the master's address and port", "[preflight]") {
  Fixture f;
  f.runner.Says(R"({"python": "3", "torch": "1", "backend_ok": true})");
  SECTION("node 0: the port is taken") {
    f.net.listen = Error{"Address already in use", ""};
    const CheckItem& port =
        Item(f.Run({"--device", "cpu", "--master-port", "29511"}), "master-port");
    CHECK(port.status == CheckStatus::kFail);
    CHECK(port.evidence == "port 29511 is in use on this node: Address already in use");
    CHECK(port.fix ==
          "choose another --master-port, or stop the program holding it (ss -ltnp 'sport = "
          ":29511' shows it)");
  }
  SECTION("node 0 with --standalone: chosen at launch") {
    f.net.listen = Error{"Address already in use", ""};
    const CheckItem& port = Item(f.Run({"--device", "cpu", "--standalone"}), "master-port");
    CHECK(port.status == CheckStatus::kOk);
    CHECK(port.evidence == "port chosen at launch (a free one)");
  }
  const std::vector<std::string> worker = {"--device",      "cpu",  "--nnodes",      "2",
                                           "--node-rank",   "1",    "--master-addr", "node0",
                                           "--master-port", "29500"};
  SECTION("another node: the master accepts connections") {
    f.net.connect.address = "10.0.0.1";
    const CheckReport report = f.Run(worker);
    CHECK(f.net.connected_to == "node0:29500");
    CHECK(Item(report, "master-port").evidence == "node0:29500 (10.0.0.1) accepts connections");
  }
  SECTION("another node: nothing listens yet is a warning") {
    f.net.connect = {ConnectOutcome::Kind::kRefused, "10.0.0.1", "Connection refused"};
    const CheckItem& port = Item(f.Run(worker), "master-port");
    CHECK(port.status == CheckStatus::kWarn);
    CHECK(port.evidence == "nothing listens on node0:29500 (10.0.0.1) yet: Connection refused");
    CHECK(port.fix ==
          "expected until node 0 starts gculaunch; otherwise check node 0, --master-addr and "
          "--master-port");
  }
  SECTION("another node: no answer is a failure") {
    f.net.connect = {ConnectOutcome::Kind::kTimedOut, "10.0.0.1", "no answer"};
    const CheckItem& port = Item(f.Run(worker), "master-port");
    CHECK(port.status == CheckStatus::kFail);
    CHECK(port.evidence == "no answer from node0:29500 (10.0.0.1) within 3 s");
  }
  SECTION("the name does not resolve") {
    f.net.resolved = Error{"Name or service not known", ""};
    const CheckReport report = f.Run(worker);
    const CheckItem& addr = Item(report, "master-addr");
    CHECK(addr.status == CheckStatus::kFail);
    CHECK(addr.evidence == "cannot resolve 'node0': Name or service not known");
    CHECK(addr.fix == "use an IP address, or a name every node resolves (DNS or /etc/hosts)");
    CHECK_FALSE(Has(report, "master-port"));
  }
}

TEST_CASE("preflight: the socket interface variable", "[preflight]") {
  Fixture f;
  f.runner.Says(R"({"python": "3", "torch": "1", "backend_ok": true})");
  f.root.Write("sys/class/net/eth0/type", "1");
  f.root.Write("sys/class/net/lo/type", "772");
  const std::vector<std::string> two_nodes = {"--device", "cpu",           "--nnodes",
                                              "2",        "--master-addr", "127.0.0.1"};
  SECTION("unset on one node: nothing to check") {
    CHECK_FALSE(Has(f.Run({"--device", "cpu"}), "interface"));
  }
  SECTION("unset across nodes: a warning") {
    const CheckItem& iface = Item(f.Run(two_nodes), "interface");
    CHECK(iface.status == CheckStatus::kWarn);
    CHECK(iface.evidence ==
          "GLOO_SOCKET_IFNAME is not set: the collective library picks a network interface "
          "itself");
  }
  SECTION("names an interface that exists (prefix)") {
    f.env.Set("GLOO_SOCKET_IFNAME", "eth");
    const CheckItem& iface = Item(f.Run(two_nodes), "interface");
    CHECK(iface.status == CheckStatus::kOk);
    CHECK(iface.evidence == "GLOO_SOCKET_IFNAME=eth matches eth0");
  }
  SECTION("names one that does not") {
    std::vector<std::string> args = two_nodes;
    args.insert(args.end(), {"--env", "GLOO_SOCKET_IFNAME=ib0,eth0"});
    const CheckItem& iface = Item(f.Run(args), "interface");
    CHECK(iface.status == CheckStatus::kFail);
    CHECK(iface.evidence ==
          "GLOO_SOCKET_IFNAME=ib0,eth0: no interface ib0 on this node (it has eth0, lo)");
    CHECK(iface.fix == "set GLOO_SOCKET_IFNAME to one of this node's interfaces: eth0, lo");
  }
  SECTION("an exact name must match exactly; exclusions need nothing") {
    f.env.Set("GLOO_SOCKET_IFNAME", "=eth");
    CHECK(Item(f.Run(two_nodes), "interface").status == CheckStatus::kFail);
    f.env.Set("GLOO_SOCKET_IFNAME", "^docker,lo");
    const CheckItem& iface = Item(f.Run(two_nodes), "interface");
    CHECK(iface.status == CheckStatus::kOk);
    CHECK(iface.evidence == "GLOO_SOCKET_IFNAME=^docker,lo matches lo");
  }
}

TEST_CASE("preflight: text and JSON reports", "[preflight]") {
  Fixture f;
  f.Cards(8);
  const CheckReport report = f.Run({"--device", "gcu", "--nproc-per-node", "8"});
  const std::string text = RenderCheckText(report);
  CHECK(text.rfind("gculaunch check: device enflame-gcu (backend eccl), 8 ranks on node 0 of 1\n",
                   0) == 0);
  CHECK(text.find("\nfail  driver         /sys/module/enflame is missing: the enflame driver is "
                  "not loaded\n                     fix: load it on the host") !=
        std::string::npos);
  CHECK(text.find("\nok    cards          8 device files") != std::string::npos);
  CHECK(text.substr(text.rfind("result:")) == "result: 2 failed: this node is not ready\n");

  const auto json = nlohmann::ordered_json::parse(RenderCheckJson(report));
  std::vector<std::string> keys;
  for (const auto& item : json.items()) keys.push_back(item.key());
  CHECK(keys == std::vector<std::string>{"device", "backend", "interpreter", "interpreter_source",
                                         "nnodes", "node_rank", "nproc_per_node", "checks",
                                         "failed", "warnings", "ok"});
  CHECK(json["failed"] == 2);
  CHECK(json["ok"] == false);
  REQUIRE(json["checks"].size() == report.items.size());
  CHECK(json["checks"][1]["name"] == "cards");
  CHECK(json["checks"][1]["status"] == "ok");
  CHECK(json["checks"][2]["status"] == "fail");
  CHECK(json["checks"][2]["fix"] == Item(report, "driver").fix);
}

}  // namespace
}  // namespace gculaunch
