#include "launcher/check/preflight.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "base/one_line.h"
#include "base/text.h"
#include "launcher/check/ld_cache.h"
#include "launcher/frontend/dry_run.h"
#include "launcher/frontend/rank_env.h"
#include "launcher/frontend/ranks_torch.h"

namespace gculaunch {
namespace {

// The probe is Python 3.6-compatible (T20 images ship 3.6 and 3.8): no
// f-strings, no walrus, and only modules of python3-minimal (no json: it
// writes its one JSON line itself).  Everything it learns goes into that line
// behind a marker, so output from the user's sitecustomize or a noisy vendor
// import cannot confuse the parser.
constexpr const char* kProbeSource = R"PY(
import importlib, sys
backend, module = sys.argv[1], sys.argv[2]
def enc(v):
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    out = []
    for c in str(v):
        out.append(c if c not in '"\\' and ord(c) >= 32 else "\\u%04x" % ord(c))
    return '"' + "".join(out) + '"'
def dumps(d):
    return "{" + ", ".join(enc(k) + ": " + enc(v) for k, v in sorted(d.items())) + "}"
out = {"python": sys.version.split()[0]}
def why(e):
    text = str(e).strip().splitlines()
    return type(e).__name__ + (": " + text[-1] if text else "")
try:
    import torch
    out["torch"] = str(torch.__version__)
except BaseException as e:
    out["torch_error"] = why(e)
if "torch" in out and module:
    try:
        m = importlib.import_module(module)
        out["module"] = str(getattr(m, "__version__", ""))
        try:
            importlib.import_module(module + ".distributed")
        except ImportError:
            pass
        count = getattr(m, "device_count", None)
        if callable(count):
            try:
                out["module_devices"] = int(count())
            except BaseException as e:
                out["module_devices_error"] = why(e)
    except BaseException as e:
        out["module_error"] = why(e)
if "torch" in out:
    try:
        import torch.distributed as dist
        if not dist.is_available():
            out["backend_error"] = "torch.distributed is not available in this torch build"
        else:
            dist.Backend(backend)
            probe = {"gloo": "is_gloo_available", "nccl": "is_nccl_available",
                     "mpi": "is_mpi_available"}.get(backend)
            if probe and not getattr(dist, probe)():
                out["backend_error"] = "this torch build has no " + backend + " support"
            else:
                out["backend_ok"] = True
    except BaseException as e:
        out["backend_error"] = why(e)
sys.stdout.write("GCULAUNCH_PROBE " + dumps(out) + "\n")
)PY";

constexpr const char* kProbeMarker = "GCULAUNCH_PROBE ";

// Directories glibc's loader searches after its cache on Debian/Ubuntu x86-64.
constexpr const char* kDefaultLibDirs[] = {"/lib/x86_64-linux-gnu",
                                           "/usr/lib/x86_64-linux-gnu",
                                           "/lib64",
                                           "/usr/lib64",
                                           "/lib",
                                           "/usr/lib"};

// "/dev/gcuN" for dir /dev and pattern gcu([0-9]+).
std::string DeviceFilesName(const DeviceProfile& profile) {
  std::string pattern = profile.device_pattern;
  const std::string group = "([0-9]+)";
  if (const size_t at = pattern.find(group); at != std::string::npos) {
    pattern.replace(at, group.size(), "N");
  }
  return profile.device_dir + "/" + pattern;
}

// The probe's report: the JSON object after the marker on the last line that has one.
std::optional<nlohmann::json> ProbeFacts(const std::string& out) {
  nlohmann::json facts;
  bool parsed = false;
  for (const std::string& line : Split(out, '\n')) {
    if (line.rfind(kProbeMarker, 0) != 0) continue;
    facts = nlohmann::json::parse(line.substr(std::string(kProbeMarker).size()), nullptr,
                                  /*allow_exceptions=*/false);
    parsed = facts.is_object();
  }
  if (!parsed) return std::nullopt;
  return facts;
}

// A text fact of the probe, "" when it is missing or not text.
std::string FactText(const nlohmann::json& facts, const char* key) {
  return facts.contains(key) && facts[key].is_string() ? facts[key].get<std::string>() : "";
}

// The last line of `text` that is not blank, trimmed.
std::string LastLine(const std::string& text) {
  std::string last;
  for (const std::string& line : Split(text, '\n')) {
    if (!Trim(line).empty()) last = Trim(line);
  }
  return last;
}

bool LibraryMatches(const std::string& file, const std::string& library) {
  return file == library || file.rfind(library + ".", 0) == 0;
}

class Preflight {
 public:
  Preflight(const LaunchSpec& spec, const EnvMap& base, const PreflightTools& tools,
            const PreflightSettings& settings)
      : spec_(spec),
        tools_(tools),
        settings_(settings),
        rank_env_(BuildRankEnv(spec, base, 0, 0, DryRunRuntime(spec))),
        base_(base) {
    report_.device = spec.profile.name;
    report_.backend = spec.profile.backend;
    report_.interpreter = spec.python;
    report_.interpreter_source = settings.interpreter_source;
    report_.nnodes = spec.nnodes;
    report_.node_rank = spec.node_rank;
    report_.nproc_per_node = spec.nproc_per_node;
  }

  CheckReport Run() {
    const bool python_ok = Interpreter();
    Cards();
    Driver();
    Library();
    if (python_ok) PythonSide();
    // etcd: the store's host is elected per epoch; the app layer checks the etcd endpoints.
    if (!CapabilitiesOf(spec_.rdzv).elected_leader) Network();
    Interface();
    return std::move(report_);
  }

 private:
  void Add(std::string name, CheckStatus status, const std::string& evidence,
           std::string fix = "") {
    if (status == CheckStatus::kOk) fix.clear();
    report_.items.push_back({std::move(name), status, OneLine(evidence), OneLine(fix)});
  }

  bool Interpreter() {
    if (spec_.python.empty()) {
      Add("interpreter", CheckStatus::kWarn,
          "--no-python: SCRIPT is not run by Python, so the Python checks were skipped",
          "check the Python your program starts with: gculaunch check --python PATH");
      return false;
    }
    const bool has_slash = spec_.python.find('/') != std::string::npos;
    if (has_slash && tools_.files.FindExecutable(spec_.python, "")) {
      Add("interpreter", CheckStatus::kOk,
          spec_.python + " (" + settings_.interpreter_source + ")");
      return true;
    }
    Add("interpreter", CheckStatus::kFail,
        spec_.python + " (" + settings_.interpreter_source +
            "): " + (has_slash ? "not an executable file" : "not found on PATH"),
        "install Python 3 with PyTorch, or name the interpreter with --python PATH (or "
        "PYTHON_EXEC)");
    return false;
  }

  void Cards() {
    const DeviceProfile& profile = spec_.profile;
    const int nproc = spec_.nproc_per_node;
    const bool uses_cards = profile.has_devices() || !profile.visible_env.empty();
    if (!uses_cards) {
      Add("cards", CheckStatus::kOk,
          "device " + profile.name + " uses no cards; " + Plural(nproc, "rank") + " on " +
              Plural(tools_.probe.CpuCount(), "CPU"));
      return;
    }
    int cards = 0;
    std::string what;
    if (!profile.visible_env.empty() && base_.Has(profile.visible_env.front())) {
      cards = static_cast<int>(Split(base_.GetOr(profile.visible_env.front(), ""), ',').size());
      what = "card pool " + base_.GetOr(profile.visible_env.front(), "") + " from " +
             profile.visible_env.front();
    } else {
      const std::vector<DeviceFile> found = tools_.probe.FindDevices(profile);
      cards = static_cast<int>(found.size());
      if (cards == 0) {
        Add("cards", CheckStatus::kFail,
            "no " + DeviceFilesName(profile) + " device files found for " + Plural(nproc, "rank"),
            "check that the " + profile.name +
                " driver is loaded and, in a container, that the cards are mounted; or use "
                "--device cpu");
        return;
      }
      what = Plural(cards, "device file") + " " + found.front().path +
             (cards > 1 ? " ... " + found.back().path : "");
    }
    if (nproc > cards) {
      if (spec_.bind == DeviceBind::kRank) {
        Add("cards", CheckStatus::kFail,
            "--bind rank: " + Plural(nproc, "rank") + " need " + std::to_string(nproc) +
                " cards, found " + what,
            "use --nproc-per-node " + std::to_string(cards) + " or fewer, or --bind all");
      } else {
        Add("cards", CheckStatus::kWarn,
            Plural(nproc, "rank") + " on " + what + ": ranks share cards round-robin",
            "use --nproc-per-node " + std::to_string(cards) + " for one rank per card");
      }
    } else if (nproc < cards) {
      Add("cards", CheckStatus::kWarn,
          Plural(nproc, "rank") + " for " + what + ": " + Plural(cards - nproc, "card") +
              " stay idle",
          "use --nproc-per-node " + std::to_string(cards) + " (or auto) for one rank per card");
    } else {
      Add("cards", CheckStatus::kOk, what + " for " + Plural(nproc, "rank"));
    }
  }

  void Driver() {
    const std::string& path = spec_.profile.driver_path;
    if (path.empty()) return;
    if (tools_.probe.Exists(path)) {
      std::string evidence = path + " present";
      if (auto version = tools_.probe.ReadFile(path + "/version")) {
        if (!Trim(*version).empty()) evidence += " (version " + Trim(*version) + ")";
      }
      Add("driver", CheckStatus::kOk, evidence);
      return;
    }
    const std::string module = path.substr(path.find_last_of('/') + 1);
    Add("driver", CheckStatus::kFail, path + " is missing: the " + module + " driver is not loaded",
        "load it on the host (modprobe " + module +
            ", or the vendor's installer); a container "
            "uses the host's driver");
  }

  void Library() {
    const std::string& library = spec_.profile.collective_library;
    if (library.empty()) return;
    const std::string ld_path = rank_env_.GetOr("LD_LIBRARY_PATH", "");
    for (const std::string& dir : Split(ld_path, ':')) {
      if (dir.empty()) continue;
      for (const std::string& file : tools_.probe.ListDir(dir)) {
        if (LibraryMatches(file, library)) {
          Add("library", CheckStatus::kOk, file + " in " + dir + " (LD_LIBRARY_PATH)");
          return;
        }
      }
    }
    std::string cache_note;
    if (auto bytes = tools_.probe.ReadFile("/etc/ld.so.cache")) {
      auto entries = ParseLdCache(*bytes);
      if (entries.ok()) {
        for (const LdCacheEntry& entry : *entries) {
          if (entry.MatchesHost() && LibraryMatches(entry.name, library)) {
            Add("library", CheckStatus::kOk, entry.name + " -> " + entry.path + " (ld.so.cache)");
            return;
          }
        }
      } else {
        cache_note = " (/etc/ld.so.cache: " + entries.error().what + ")";
      }
    } else {
      cache_note = " (/etc/ld.so.cache cannot be read)";
    }
    for (const char* dir : kDefaultLibDirs) {
      for (const std::string& file : tools_.probe.ListDir(dir)) {
        if (LibraryMatches(file, library)) {
          Add("library", CheckStatus::kOk,
              file + " in " + dir + " (a default directory, not in ld.so.cache; ldconfig adds it)");
          return;
        }
      }
    }
    Add("library", CheckStatus::kFail,
        "no " + library + "* in LD_LIBRARY_PATH (" + (ld_path.empty() ? "unset" : ld_path) +
            "), the dynamic linker's cache or the default directories" + cache_note,
        "install the package that provides " + library +
            ", then run ldconfig (or add its directory to LD_LIBRARY_PATH)");
  }

  // The Python side: the probe runs rank 0's interpreter with rank 0's environment; torch,
  // the vendor module and the backend are checked from what it reports.
  void PythonSide() {
    const std::optional<nlohmann::json> facts = RunProbe();
    if (!facts) return;
    if (!Torch(*facts)) return;
    const bool module_ok = VendorModule(*facts);
    Backend(*facts, module_ok);
  }

  // What to run to see a failure of the probe for oneself.
  std::string ByHand() const {
    const std::string& module = spec_.profile.python_module;
    return "run " + spec_.python + " -c 'import torch" + (module.empty() ? "" : ", " + module) +
           "' by hand to see why";
  }

  // The probe's facts, or nullopt (with a failed python-probe check) when it did not report.
  std::optional<nlohmann::json> RunProbe() {
    EnvMap env = rank_env_;
    // A probe is not a rank: the Python shim must stay inactive in it.
    for (const std::string& key : std::vector<std::string>{
             "GCULAUNCH_SHIM_PARENT", "GCULAUNCH_SHIM_DIR", "GCULAUNCH_SHIM_FALLBACK",
             "GCULAUNCH_SHIM_MODULE", "GCULAUNCH_SHIM_VISIBLE_ENV"}) {
      env.Erase(key);
    }
    const CommandOutcome outcome = tools_.runner.Run(
        {spec_.python, "-c", kProbeSource, spec_.profile.backend, spec_.profile.python_module}, env,
        settings_.probe_timeout_s);
    if (outcome.kind == CommandOutcome::Kind::kSpawnFailed) {
      Add("python-probe", CheckStatus::kFail, "cannot start " + spec_.python + ": " + outcome.error,
          "give a working interpreter with --python PATH");
      return std::nullopt;
    }
    if (outcome.kind == CommandOutcome::Kind::kTimedOut) {
      std::ostringstream seconds;
      seconds << settings_.probe_timeout_s;
      Add("python-probe", CheckStatus::kFail,
          spec_.python + " did not finish importing within " + seconds.str() +
              " s (its process group was killed)",
          ByHand() + " (an import hangs: driver or device busy?)");
      return std::nullopt;
    }
    std::optional<nlohmann::json> facts = ProbeFacts(outcome.out);
    if (!facts) {
      const std::string last = LastLine(outcome.err);
      const std::string how = outcome.kind == CommandOutcome::Kind::kSignaled
                                  ? "was killed by signal " + std::to_string(outcome.code)
                                  : "exited with code " + std::to_string(outcome.code);
      Add("python-probe", CheckStatus::kFail,
          spec_.python + " " + how + " before reporting" + (last.empty() ? "" : ": " + last),
          ByHand());
    }
    return facts;
  }

  // `import torch`; false when it failed (the checks that need torch are then left out).
  bool Torch(const nlohmann::json& facts) {
    const std::string python_version = FactText(facts, "python");
    if (facts.contains("torch_error")) {
      Add("torch", CheckStatus::kFail,
          "import torch failed in " + spec_.python + " (Python " + python_version +
              "): " + FactText(facts, "torch_error"),
          "install PyTorch for this interpreter, or choose the one that has it with --python "
          "PATH (or PYTHON_EXEC)");
      return false;
    }
    // The NCCL error-handling variable a launch gives this torch's ranks (ranks_torch.h).
    RanksTorch torch{RanksTorch::State::kFound, FactText(facts, "torch"), ""};
    Add("torch", CheckStatus::kOk,
        "torch " + torch.version + " (Python " + python_version + "); the ranks get " +
            Join(NcclErrorHandlingVariables(torch), " and ") +
            "=1 unless set, as this torch's torchrun does");
    return true;
  }

  // The profile's vendor module and its device count; false when it cannot be imported.
  // No module named by the profile: nothing to check.
  bool VendorModule(const nlohmann::json& facts) {
    const std::string& module = spec_.profile.python_module;
    if (module.empty()) return true;
    if (facts.contains("module_error")) {
      Add("vendor-module", CheckStatus::kFail,
          "import " + module + " failed: " + FactText(facts, "module_error"),
          "install the " + module + " wheel built for torch " + FactText(facts, "torch") +
              " and Python " + FactText(facts, "python") + " into " + spec_.python +
              " (pip install " + module + "-*.whl), or choose its interpreter with --python");
      return false;
    }
    const std::string version = FactText(facts, "module");
    std::string evidence = module + (version.empty() ? "" : " " + version) + " imported";
    CheckStatus status = CheckStatus::kOk;
    std::string fix;
    if (facts.contains("module_devices") && facts["module_devices"].is_number_integer()) {
      const int devices = facts["module_devices"].get<int>();
      evidence += "; device_count() = " + std::to_string(devices);
      if (devices == 0) {
        status = CheckStatus::kFail;
        fix =
            "the runtime sees no cards: check the driver, the container's device mounts "
            "and the visible-devices variable";
      } else if (devices < spec_.nproc_per_node && spec_.bind == DeviceBind::kAll) {
        status = CheckStatus::kWarn;
        fix = "use --nproc-per-node " + std::to_string(devices) + " for one rank per card";
      }
    } else if (facts.contains("module_devices_error")) {
      evidence += "; device_count() failed: " + FactText(facts, "module_devices_error");
      status = CheckStatus::kWarn;
      fix = "check the driver and the visible-devices variable";
    } else {
      evidence += " (it has no device_count())";
    }
    Add("vendor-module", status, evidence, fix);
    return true;
  }

  // torch.distributed knows the profile's backend (after the vendor module's import).
  void Backend(const nlohmann::json& facts, bool module_ok) {
    const std::string& module = spec_.profile.python_module;
    const std::string& backend = spec_.profile.backend;
    const std::string after = module.empty() ? "" : " after importing " + module;
    if (facts.contains("backend_ok")) {
      Add("backend", CheckStatus::kOk,
          "torch.distributed backend '" + backend + "' is available" + after);
      return;
    }
    std::string fix;
    if (!module_ok) {
      fix = "make " + module + " importable first (see vendor-module); it registers '" + backend +
            "'";
    } else if (!module.empty()) {
      fix = "install the " + module + " build (and collective library) that registers '" + backend +
            "' with torch.distributed; --python-shim can fall back to gloo meanwhile";
    } else {
      fix = "install the PyTorch extension that registers '" + backend +
            "', or use a profile with a built-in backend (--device cpu: gloo); --python-shim "
            "can fall back to gloo";
    }
    Add("backend", CheckStatus::kFail,
        "torch.distributed backend '" + backend + "' is not available" + after + ": " +
            FactText(facts, "backend_error"),
        fix);
  }

  void Network() {
    const std::string& host = spec_.master_addr;
    const int port = spec_.master_port;
    auto addresses = tools_.net.Resolve(host);
    if (!addresses.ok()) {
      Add("master-addr", CheckStatus::kFail,
          "cannot resolve '" + host + "': " + addresses.error().what,
          "use an IP address, or a name every node resolves (DNS or /etc/hosts)");
      if (spec_.node_rank != 0) return;
    } else {
      Add("master-addr", CheckStatus::kOk, host + " resolves to " + Join(*addresses, ", "));
    }
    const std::string endpoint = host + ":" + std::to_string(port);
    if (spec_.node_rank == 0) {
      if (port == 0) {
        Add("master-port", CheckStatus::kOk, "port chosen at launch (a free one)");
        return;
      }
      Status free = tools_.net.CanListen(port);
      if (free.ok()) {
        Add("master-port", CheckStatus::kOk,
            "port " + std::to_string(port) + " is free to listen on (this node hosts the store)");
      } else {
        Add("master-port", CheckStatus::kFail,
            "port " + std::to_string(port) + " is in use on this node: " + free.error().what,
            "choose another --master-port, or stop the program holding it (ss -ltnp 'sport = :" +
                std::to_string(port) + "' shows it)");
      }
      return;
    }
    std::ostringstream seconds;
    seconds << settings_.connect_timeout_s;
    const ConnectOutcome outcome = tools_.net.Connect(host, port, settings_.connect_timeout_s);
    const std::string where =
        endpoint +
        (outcome.address.empty() || outcome.address == host ? "" : " (" + outcome.address + ")");
    switch (outcome.kind) {
      case ConnectOutcome::Kind::kConnected:
        Add("master-port", CheckStatus::kOk, where + " accepts connections");
        break;
      case ConnectOutcome::Kind::kRefused:
        Add("master-port", CheckStatus::kWarn,
            "nothing listens on " + where + " yet: " + outcome.error,
            "expected until node 0 starts gculaunch; otherwise check node 0, --master-addr and "
            "--master-port");
        break;
      case ConnectOutcome::Kind::kTimedOut:
        Add("master-port", CheckStatus::kFail,
            "no answer from " + where + " within " + seconds.str() + " s",
            "check the firewall and routing between the nodes: node 0 must accept TCP on port " +
                std::to_string(port));
        break;
      case ConnectOutcome::Kind::kUnreachable:
        Add("master-port", CheckStatus::kFail, "cannot reach " + where + ": " + outcome.error,
            "check --master-addr and the network route to node 0");
        break;
    }
  }

  void Interface() {
    const std::string& var = spec_.profile.socket_ifname_env;
    if (var.empty()) return;
    const std::optional<std::string> value = rank_env_.Get(var);
    if (!value || Trim(*value).empty()) {
      if (spec_.nnodes > 1) {
        Add("interface", CheckStatus::kWarn,
            var + " is not set: the collective library picks a network interface itself",
            "set " + var + "=<interface> (ip -br addr lists them) if it picks the wrong one");
      }
      return;
    }
    const std::vector<std::string> interfaces = tools_.probe.ListDir("/sys/class/net");
    // NCCL-style list: comma-separated prefixes, "=name" for an exact name,
    // "^..." to exclude (an exclusion needs no interface to exist).
    std::vector<std::string> missing;
    std::vector<std::string> matched;
    for (std::string item : Split(*value, ',')) {
      item = Trim(item);
      if (item.empty() || item[0] == '^') continue;
      const bool exact = item[0] == '=';
      const std::string name = exact ? item.substr(1) : item;
      bool found = false;
      for (const std::string& iface : interfaces) {
        if (exact ? iface == name : iface.rfind(name, 0) == 0) {
          found = true;
          matched.push_back(iface);
        }
      }
      if (!found) missing.push_back(name);
    }
    const std::string have = interfaces.empty() ? "none found" : Join(interfaces, ", ");
    if (!missing.empty()) {
      Add("interface", CheckStatus::kFail,
          var + "=" + *value + ": no interface " + Join(missing, ", ") + " on this node (it has " +
              have + ")",
          "set " + var + " to one of this node's interfaces: " + have);
      return;
    }
    Add("interface", CheckStatus::kOk,
        var + "=" + *value + " matches " +
            (matched.empty() ? "(exclusions only)" : Join(matched, ", ")));
  }

  const LaunchSpec& spec_;
  const PreflightTools& tools_;
  const PreflightSettings& settings_;
  EnvMap rank_env_;
  const EnvMap& base_;
  CheckReport report_;
};

const char* StatusWord(CheckStatus status) {
  switch (status) {
    case CheckStatus::kOk:
      return "ok";
    case CheckStatus::kWarn:
      return "warn";
    case CheckStatus::kFail:
      return "fail";
  }
  return "fail";
}

std::string Pad(std::string text, size_t width) {
  // At least one space: a long name (the health rows') must not run into its evidence.
  text.append(text.size() < width ? width - text.size() : 1, ' ');
  return text;
}

}  // namespace

int CheckReport::Failed() const {
  return static_cast<int>(std::count_if(items.begin(), items.end(), [](const CheckItem& item) {
    return item.status == CheckStatus::kFail;
  }));
}

int CheckReport::Warnings() const {
  return static_cast<int>(std::count_if(items.begin(), items.end(), [](const CheckItem& item) {
    return item.status == CheckStatus::kWarn;
  }));
}

CheckReport RunPreflight(const LaunchSpec& spec, const EnvMap& base_env,
                         const PreflightTools& tools, const PreflightSettings& settings) {
  return Preflight(spec, base_env, tools, settings).Run();
}

std::string RenderCheckText(const CheckReport& report) {
  std::string out = "gculaunch check: device " + report.device + " (backend " + report.backend +
                    "), " + Plural(report.nproc_per_node, "rank") + " on node " +
                    std::to_string(report.node_rank) + " of " + std::to_string(report.nnodes) +
                    "\n";
  constexpr size_t kStatusWidth = 6;
  constexpr size_t kNameWidth = 15;
  for (const CheckItem& item : report.items) {
    out += Pad(StatusWord(item.status), kStatusWidth) + Pad(item.name, kNameWidth) + item.evidence +
           "\n";
    if (!item.fix.empty()) {
      out += std::string(kStatusWidth + kNameWidth, ' ') + "fix: " + item.fix + "\n";
    }
  }
  const int failed = report.Failed();
  const int warnings = report.Warnings();
  out += "result: ";
  if (failed > 0) {
    out += std::to_string(failed) + " failed";
    if (warnings > 0) out += ", " + Plural(warnings, "warning");
    out += ": this node is not ready\n";
  } else {
    out += warnings > 0 ? "ready, " + Plural(warnings, "warning") + "\n" : "ready\n";
  }
  return out;
}

std::string RenderCheckJson(const CheckReport& report) {
  nlohmann::ordered_json out;
  out["device"] = report.device;
  out["backend"] = report.backend;
  out["interpreter"] = report.interpreter;
  out["interpreter_source"] = report.interpreter_source;
  out["nnodes"] = report.nnodes;
  out["node_rank"] = report.node_rank;
  out["nproc_per_node"] = report.nproc_per_node;
  out["checks"] = nlohmann::ordered_json::array();
  for (const CheckItem& item : report.items) {
    nlohmann::ordered_json check;
    check["name"] = item.name;
    check["status"] = StatusWord(item.status);
    check["evidence"] = item.evidence;
    check["fix"] = item.fix;
    out["checks"].push_back(std::move(check));
  }
  out["failed"] = report.Failed();
  out["warnings"] = report.Warnings();
  out["ok"] = report.Failed() == 0;
  return out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

const char* PythonProbeSourceForTest() { return kProbeSource; }

}  // namespace gculaunch
