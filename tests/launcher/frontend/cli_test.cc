#include "launcher/frontend/cli.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>

#include "base/text.h"
#include "launcher/frontend/cli_apply.h"

namespace gculaunch {
namespace {

CliOptions Parse(std::vector<std::string> args, const EnvMap& env = {}) {
  auto result = ParseCli(args, env);
  if (!result.ok()) FAIL(result.error().Format());
  REQUIRE(result->action == CliAction::kLaunch);
  return result->options;
}

std::string ParseError(std::vector<std::string> args, const EnvMap& env = {}) {
  auto result = ParseCli(args, env);
  REQUIRE_FALSE(result.ok());
  return result.error().Format();
}

// One value flag: its dashed name, a value, and how to check the parsed result.
struct ValueCase {
  std::string name;  // without "--"
  std::string value;
  std::function<bool(const CliOptions&)> check;
};

std::string Underscored(std::string name) {
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

std::string PetName(const std::string& name) {
  std::string out = "PET_";
  for (char c : Underscored(name)) out += static_cast<char>(std::toupper(c));
  return out;
}

const std::vector<ValueCase>& ValueCases() {
  static const std::vector<ValueCase> cases = {
      {"nproc-per-node", "8",
       [](const CliOptions& o) {
         return o.nproc_per_node == NprocPerNode{NprocPerNode::Kind::kCount, 8};
       }},
      {"nnodes", "2", [](const CliOptions& o) { return o.nnodes == 2; }},
      {"node-rank", "1", [](const CliOptions& o) { return o.node_rank == 1; }},
      {"master-addr", "node0", [](const CliOptions& o) { return o.master_addr == "node0"; }},
      {"master-port", "29555", [](const CliOptions& o) { return o.master_port == 29555; }},
      {"rdzv-endpoint", "node0:29400",
       [](const CliOptions& o) {
         return o.rdzv_endpoint == Endpoint{"node0", 29400};
       }},
      {"rdzv-backend", "c10d", [](const CliOptions& o) { return o.rdzv_backend == "c10d"; }},
      {"rdzv-id", "job-7", [](const CliOptions& o) { return o.rdzv_id == "job-7"; }},
      {"run-id", "job-8", [](const CliOptions& o) { return o.run_id == "job-8"; }},
      {"rdzv-conf", "timeout=900,is_host=true",
       [](const CliOptions& o) {
         return o.rdzv_conf ==
                std::map<std::string, std::string>{{"timeout", "900"}, {"is_host", "true"}};
       }},
      {"rdzv-timeout", "30", [](const CliOptions& o) { return o.rdzv_timeout == 30.0; }},
      {"node-timeout", "12", [](const CliOptions& o) { return o.node_timeout == 12.0; }},
      {"preload", "torch, numpy.linalg",
       [](const CliOptions& o) {
         return o.preload == std::vector<std::string>{"torch", "numpy.linalg"};
       }},
      {"max-restarts", "3", [](const CliOptions& o) { return o.max_restarts == 3; }},
      {"restart-backoff", "0.5:30",
       [](const CliOptions& o) {
         return o.restart_backoff == RestartBackoff{0.5, 30};
       }},
      {"max-same-failures", "5", [](const CliOptions& o) { return o.max_same_failures == 5; }},
      {"progress-file", "ckpt/step",
       [](const CliOptions& o) { return o.progress_file == "ckpt/step"; }},
      {"monitor-interval", "0.5", [](const CliOptions& o) { return o.monitor_interval == 0.5; }},
      {"role", "trainer", [](const CliOptions& o) { return o.role == "trainer"; }},
      {"python", "/opt/py/bin/python3",
       [](const CliOptions& o) { return o.python == "/opt/py/bin/python3"; }},
      {"log-dir", "logs", [](const CliOptions& o) { return o.log_dir == "logs"; }},
      {"redirects", "3", [](const CliOptions& o) { return o.redirects && o.redirects->all == 3; }},
      {"tee", "0:1,1:2",
       [](const CliOptions& o) {
         return o.tee && o.tee->per_rank == std::map<int, int>{{0, 1}, {1, 2}};
       }},
      {"local-ranks-filter", "0,2",
       [](const CliOptions& o) {
         return o.local_ranks_filter == std::vector<int>{0, 2};
       }},
      {"device", "gcu", [](const CliOptions& o) { return o.device == "gcu"; }},
      {"bind", "rank", [](const CliOptions& o) { return o.bind == DeviceBind::kRank; }},
      {"env", "A=1",
       [](const CliOptions& o) {
         return o.env == std::vector<std::pair<std::string, std::string>>{{"A", "1"}};
       }},
      {"grace-period", "10", [](const CliOptions& o) { return o.grace_period == 10.0; }},
      {"stdin", "rank0", [](const CliOptions& o) { return o.stdin_mode == StdinMode::kRank0; }},
      {"summary-json", "out.json",
       [](const CliOptions& o) { return o.summary_json == "out.json"; }},
      {"worker-port", "29600", [](const CliOptions& o) { return o.worker_port == 29600; }},
      {"format", "json", [](const CliOptions& o) { return o.format == DryRunFormat::kJson; }},
      {"sysroot", "fake-root", [](const CliOptions& o) { return o.sysroot == "fake-root"; }},
      {"platform-world-size", "procs",
       [](const CliOptions& o) { return o.platform_world_size == PlatformWorldSize::kProcs; }},
      {"job", "job.yaml", [](const CliOptions& o) { return o.job == "job.yaml"; }},
      {"cpu-affinity", "numa",
       [](const CliOptions& o) { return o.cpu_affinity == CpuAffinity::kNuma; }},
      {"progress-interval", "2.5", [](const CliOptions& o) { return o.progress_interval == 2.5; }},
      {"log-line-prefix-template", "[${role_name}-r${rank}]:",
       [](const CliOptions& o) {
         return o.log_line_prefix_template == std::string("[${role_name}-r${rank}]:");
       }},
      // metrics (docs/operations.md)
      {"metrics-port", "9464", [](const CliOptions& o) { return o.metrics_port == 9464; }},
      {"metrics-addr", "0.0.0.0",
       [](const CliOptions& o) { return o.metrics_addr == std::string("0.0.0.0"); }},
      {"store-max-queued", "64M",
       [](const CliOptions& o) { return o.store_max_queued == std::size_t{64} << 20; }},
      {"store-max-buffered", "1G",
       [](const CliOptions& o) { return o.store_max_buffered == std::size_t{1} << 30; }},
      {"job-secret-file", "/run/secrets/job",
       [](const CliOptions& o) { return o.job_secret_file == std::string("/run/secrets/job"); }},
      {"store-allow", "10.0.0.0/8",
       [](const CliOptions& o) { return o.store_allow == std::string("10.0.0.0/8"); }},
      {"hang-timeout", "1.5m", [](const CliOptions& o) { return o.hang_timeout == 90.0; }},
      {"hang-grace", "500ms", [](const CliOptions& o) { return o.hang_grace == 0.5; }},
      {"on-hang", "report", [](const CliOptions& o) { return o.on_hang == OnHang::kReport; }},
      {"health-check", "/opt/site/check-gpus",
       [](const CliOptions& o) { return o.health_check == std::string("/opt/site/check-gpus"); }},
      {"health-check-timeout", "45s",
       [](const CliOptions& o) { return o.health_check_timeout == 45.0; }},
      {"device-memory-wait", "2.5",
       [](const CliOptions& o) { return o.device_memory_wait == 2.5; }},
      {"exit-codes", "classes",
       [](const CliOptions& o) { return o.exit_codes == ExitScheme::kClasses; }},
      {"termination-log", "/tmp/t.log",
       [](const CliOptions& o) { return o.termination_log == std::string("/tmp/t.log"); }},
      {"exit-barrier-timeout", "300",
       [](const CliOptions& o) { return o.exit_barrier_timeout == 300.0; }},
      {"start-method", "fork", [](const CliOptions& o) { return o.start_method == "fork"; }},
      {"local-addr", "10.0.0.2", [](const CliOptions& o) { return o.local_addr == "10.0.0.2"; }},
      {"logs-specs", "default", [](const CliOptions& o) { return o.logs_specs == "default"; }},
      {"signals-to-handle", "SIGTERM,SIGINT",
       [](const CliOptions& o) {
         return o.signals_to_handle == std::vector<std::string>{"SIGTERM", "SIGINT"};
       }},
      {"event-log-handler", "console",
       [](const CliOptions& o) { return o.event_log_handler == "console"; }},
      {"numa-binding", "exclusive",
       [](const CliOptions& o) { return o.numa_binding == "exclusive"; }},
      {"duplicate-stdout-filters", "loss,,x,acc",
       [](const CliOptions& o) {
         return o.duplicate_stdout_filters == std::vector<std::string>{"loss,x", "acc"};
       }},
      {"duplicate-stderr-filters", "WARN",
       [](const CliOptions& o) {
         return o.duplicate_stderr_filters == std::vector<std::string>{"WARN"};
       }},
  };
  return cases;
}

struct BoolCase {
  std::string name;
  std::function<bool(const CliOptions&)> get;
};

const std::vector<BoolCase>& BoolCases() {
  static const std::vector<BoolCase> cases = {
      {"standalone", [](const CliOptions& o) { return o.standalone; }},
      {"module", [](const CliOptions& o) { return o.module; }},
      {"no-python", [](const CliOptions& o) { return o.no_python; }},
      {"use-env", [](const CliOptions& o) { return o.use_env; }},
      {"local-rank-arg", [](const CliOptions& o) { return o.local_rank_arg; }},
      {"no-agent-store", [](const CliOptions& o) { return o.no_agent_store; }},
      {"dry-run", [](const CliOptions& o) { return o.dry_run; }},
      {"python-shim", [](const CliOptions& o) { return o.python_shim; }},
      {"no-backend-fallback", [](const CliOptions& o) { return o.no_backend_fallback; }},
      {"run-path", [](const CliOptions& o) { return o.run_path; }},
      {"virtual-local-rank", [](const CliOptions& o) { return o.virtual_local_rank; }},
      {"no-python-faulthandler", [](const CliOptions& o) { return o.no_python_faulthandler; }},
      {"stack-dumps", [](const CliOptions& o) { return o.stack_dumps; }},
      {"warm-ranks", [](const CliOptions& o) { return o.warm_ranks; }},
      {"store-proxy", [](const CliOptions& o) { return o.store_proxy; }},
      {"allow-shared-log-dir", [](const CliOptions& o) { return o.allow_shared_log_dir; }},
  };
  return cases;
}

TEST_CASE("cli: every value flag in both spellings, with a space or '='", "[cli]") {
  for (const ValueCase& c : ValueCases()) {
    for (const std::string& spelling : {c.name, Underscored(c.name)}) {
      INFO("--" << spelling);
      CliOptions spaced = Parse({"--" + spelling, c.value, "train.py"});
      CHECK(c.check(spaced));
      CHECK(spaced.Source(c.name) == "--" + c.name);
      CHECK(spaced.FromCommandLineForTest(c.name));
      CliOptions joined = Parse({"--" + spelling + "=" + c.value, "train.py"});
      CHECK(c.check(joined));
    }
  }
}

TEST_CASE("cli: every boolean flag in both spellings", "[cli]") {
  for (const BoolCase& c : BoolCases()) {
    for (const std::string& spelling : {c.name, Underscored(c.name)}) {
      INFO("--" << spelling);
      CHECK_FALSE(c.get(Parse({"train.py"})));
      CliOptions o = Parse({"--" + spelling, "train.py"});
      CHECK(c.get(o));
      CHECK(o.Given(c.name));
    }
  }
}

TEST_CASE("cli: short forms and aliases", "[cli]") {
  CHECK(Parse({"-m", "pkg.train"}).module);
  CHECK(Parse({"-r", "2", "x.py"}).redirects->all == 2);
  CHECK(Parse({"-t", "1", "x.py"}).tee->all == 1);
  CliOptions shutdown = Parse({"--shutdown-timeout", "7.5", "x.py"});
  CHECK(shutdown.grace_period == 7.5);
  CHECK(shutdown.Source("grace-period") == "--grace-period");
  CHECK(Parse({"--shutdown_timeout", "3", "x.py"}).grace_period == 3.0);
}

TEST_CASE("cli: argparse abbreviations of torchrun's flags", "[cli]") {
  // As torchrun users write them (argparse resolves unique prefixes).
  CHECK(Parse({"--nnode=1", "x.py"}).nnodes == 1);
  CHECK(Parse({"--nproc_per_nod", "8", "x.py"}).nproc_per_node ==
        NprocPerNode{NprocPerNode::Kind::kCount, 8});
  CHECK(Parse({"--nproc-per", "2", "x.py"}).nproc_per_node ==
        NprocPerNode{NprocPerNode::Kind::kCount, 2});
  CliOptions abbreviated =
      Parse({"--node_r", "1", "--max_re=2", "--stand", "--rdzv_endp", "n0:29400", "--log_d", "logs",
             "--shutdown", "5", "--mod", "pkg.train", "arg"});
  CHECK(abbreviated.node_rank == 1);
  CHECK(abbreviated.max_restarts == 2);
  CHECK(abbreviated.standalone);
  CHECK(abbreviated.rdzv_endpoint == Endpoint{"n0", 29400});
  CHECK(abbreviated.log_dir == "logs");
  CHECK(abbreviated.grace_period == 5.0);
  CHECK(abbreviated.module);
  CHECK(abbreviated.script == "pkg.train");
  CHECK(abbreviated.script_args == std::vector<std::string>{"arg"});
  // The flags are recorded under their canonical names.
  CHECK(abbreviated.Source("node-rank") == "--node-rank");
  // Values are skipped: a value that looks like a prefix is not resolved.
  CHECK(Parse({"--role", "--ro", "x.py"}).role == "--ro");
  // Words after SCRIPT are the script's, abbreviations or not.
  CHECK(Parse({"x.py", "--nnode=3"}).script_args == std::vector<std::string>{"--nnode=3"});
  CHECK_FALSE(Parse({"x.py", "--nnode=3"}).nnodes.has_value());
  // -r3 (value attached) does not stop the resolution of the next flags.
  CliOptions shorts = Parse({"-r3", "-t", "1", "--nnod", "1", "x.py"});
  CHECK(shorts.redirects->all == 3);
  CHECK(shorts.nnodes == 1);
}

TEST_CASE(
    "cli: abbreviations: ambiguous ones list the candidates, gculaunch's own flags "
    "need their full name",
    "[cli]") {
  CHECK(ParseError({"--master", "h", "x.py"}) ==
        "gculaunch: ambiguous flag '--master': it could be --master-addr, --master-port (fix: "
        "write the whole flag name)");
  CHECK(ParseError({"--local=1", "x.py"}) ==
        "gculaunch: ambiguous flag '--local': it could be --local-addr, --local-ranks-filter "
        "(fix: write the whole flag name)");
  CHECK(
      ParseError({"--rdzv_", "x", "x.py"})
          .find("ambiguous flag '--rdzv_': it could be --rdzv-endpoint, --rdzv-backend, --rdzv-id, "
                "--rdzv-conf") != std::string::npos);
  // --no resolves to torchrun's --no-python: gculaunch's --no-agent-store and
  // --no-backend-fallback take no part, so new gculaunch flags never break old lines.
  CHECK(Parse({"--no-py", "./run.sh"}).no_python);
  CHECK(ParseError({"--no", "./run.sh"}) ==
        "gculaunch: ambiguous flag '--no': it could be --node-rank, --no-python (fix: write the "
        "whole flag name)");
  // gculaunch-only flags: full names only.
  CHECK(
      ParseError({"--summary", "s.json", "x.py"}).rfind("gculaunch: unknown flag '--summary'", 0) ==
      0);
  CHECK(ParseError({"--dry", "x.py"}).rfind("gculaunch: unknown flag '--dry'", 0) == 0);
  CHECK(ParseError({"--progress", "1", "x.py"}).rfind("gculaunch: unknown flag '--progress'", 0) ==
        0);
  // A full gculaunch name that is also a prefix of a torchrun flag is itself.
  CHECK(Parse({"--python", "/p/python3", "x.py"}).python == "/p/python3");
}

TEST_CASE("cli: torchrun flags gculaunch cannot honour or checks", "[cli]") {
  CHECK(ParseError({"--logs-specs", "my_plugin", "x.py"}) ==
        "gculaunch: --logs-specs 'my_plugin': gculaunch cannot load torchrun.logs_specs plugins; "
        "only 'default' (torchrun's DefaultLogsSpecs) is supported (fix: drop --logs-specs and "
        "use --log-dir, --redirects and --tee)");
  CHECK(ParseError({"--start_method", "thread", "x.py"}) ==
        "gculaunch: --start-method 'thread': expected spawn, fork or forkserver (fix: e.g. "
        "--start-method spawn)");
  CHECK(ParseError({"--numa-binding", "numa", "x.py"}) ==
        "gculaunch: --numa-binding 'numa': expected node, socket, exclusive or core-complex (fix: "
        "e.g. --numa-binding node)");
  CHECK(ParseError({"--preload", "torch,my-module", "x.py"}) ==
        "gculaunch: --preload 'torch,my-module': 'my-module' is not a Python module name (fix: "
        "e.g. --preload torch,torch.distributed)");
  CHECK(ParseError({"--preload", ",", "x.py"}) ==
        "gculaunch: --preload ',': expected module names (fix: e.g. --preload "
        "torch,torch.distributed)");
  CHECK(ParseError({"--signals-to-handle", "SIGTERM,TERM", "x.py"}) ==
        "gculaunch: --signals-to-handle 'SIGTERM,TERM': 'TERM' is not a signal name gculaunch "
        "knows (fix: e.g. --signals-to-handle SIGTERM,SIGINT,SIGHUP,SIGQUIT)");
  CHECK(ParseError({"--hang-timeout", "0", "x.py"}) ==
        "gculaunch: --hang-timeout '0': expected a duration > 0 (seconds, or with ms, s, m, h) "
        "(fix: e.g. --hang-timeout 90s)");
  CHECK(ParseError({"--hang-timeout", "3x", "x.py"}).find("--hang-timeout '3x'") !=
        std::string::npos);
  CHECK(ParseError({"--on-hang", "kill", "x.py"}) ==
        "gculaunch: --on-hang 'kill': expected stop, restart or report (fix: e.g. --on-hang "
        "stop)");
  CHECK(Parse({"--hang-timeout", "3s", "x.py"}).hang_timeout == 3.0);
  CHECK(Parse({"--hang-timeout", "2h", "x.py"}).hang_timeout == 7200.0);
  CHECK(Parse({"--hang-timeout", "45", "x.py"}).hang_timeout == 45.0);
  CHECK(ParseError({"--progress-interval=-1", "x.py"}) ==
        "gculaunch: --progress-interval '-1': expected seconds (a number >= 0) (fix: e.g. "
        "--progress-interval 25)");
  CHECK(Parse({"--signals-to-handle", "SIGTERM, SIGINT,SIGHUP", "x.py"}).signals_to_handle ==
        std::vector<std::string>{"SIGTERM", "SIGINT", "SIGHUP"});
}

TEST_CASE("cli: every flag falls back to its PET_ variable", "[cli]") {
  for (const ValueCase& c : ValueCases()) {
    const std::string pet = PetName(c.name);
    INFO(pet);
    CliOptions o = Parse({"train.py"}, EnvMap{{pet, c.value}});
    CHECK(c.check(o));
    CHECK(o.Source(c.name) == pet);
    CHECK_FALSE(o.FromCommandLineForTest(c.name));
  }
  for (const BoolCase& c : BoolCases()) {
    const std::string pet = PetName(c.name);
    INFO(pet);
    CHECK(c.get(Parse({"train.py"}, EnvMap{{pet, "1"}})));
    CHECK(c.get(Parse({"train.py"}, EnvMap{{pet, "true"}})));
    CHECK_FALSE(c.get(Parse({"train.py"}, EnvMap{{pet, "0"}})));
    CHECK_FALSE(c.get(Parse({"train.py"}, EnvMap{{pet, "false"}})));
  }
}

TEST_CASE("cli: the command line wins over PET_ variables", "[cli]") {
  EnvMap env{{"PET_NPROC_PER_NODE", "4"},
             {"PET_NNODES", "3"},
             {"PET_STANDALONE", "1"},
             {"PET_ENV", "A=from-env"}};
  CliOptions o = Parse({"--nproc_per_node=2", "--standalone=false", "--env", "B=cli", "x.py"}, env);
  CHECK(o.nproc_per_node->count == 2);
  CHECK(o.Source("nproc-per-node") == "--nproc-per-node");
  CHECK(o.nnodes == 3);  // not on the command line: PET_NNODES applies
  CHECK(o.Source("nnodes") == "PET_NNODES");
  CHECK_FALSE(o.standalone);
  CHECK(o.env == std::vector<std::pair<std::string, std::string>>{{"B", "cli"}});
}

TEST_CASE("cli: PET_ENV holds one KEY=VALUE per line, empty PET_ values count as unset", "[cli]") {
  CliOptions o = Parse({"x.py"}, EnvMap{{"PET_ENV", "A=1\nB=x y\n"}, {"PET_NNODES", ""}});
  CHECK(o.env == std::vector<std::pair<std::string, std::string>>{{"A", "1"}, {"B", "x y"}});
  CHECK_FALSE(o.nnodes.has_value());
  CHECK_FALSE(o.Given("nnodes"));
}

TEST_CASE("cli: --env is repeatable and keeps order, last single-value flag wins", "[cli]") {
  CliOptions o = Parse(
      {"--env", "A=1", "--env=B=2=3", "--env", "A=4", "--nnodes", "1", "--nnodes", "2", "x.py"});
  CHECK(o.env ==
        std::vector<std::pair<std::string, std::string>>{{"A", "1"}, {"B", "2=3"}, {"A", "4"}});
  CHECK(o.nnodes == 2);
}

TEST_CASE("cli: everything from SCRIPT on goes to the script untouched", "[cli]") {
  CliOptions o = Parse({"--nproc-per-node", "2", "train.py", "--nproc-per-node", "3", "--bogus",
                        "-m", "--", "${local_rank}", "--help", "--version", ""});
  CHECK(o.script == "train.py");
  CHECK(o.script_args == std::vector<std::string>{"--nproc-per-node", "3", "--bogus", "-m", "--",
                                                  "${local_rank}", "--help", "--version", ""});
  CHECK(o.nproc_per_node->count == 2);
  CHECK_FALSE(o.module);

  CliOptions dashed = Parse({"--standalone", "--", "train.py", "-x"});
  CHECK(dashed.script == "train.py");
  CHECK(dashed.script_args == std::vector<std::string>{"-x"});

  CliOptions module = Parse({"-m", "pkg.train", "--lr", "0.1"});
  CHECK(module.module);
  CHECK(module.script == "pkg.train");
  CHECK(module.script_args == std::vector<std::string>{"--lr", "0.1"});
}

TEST_CASE("cli: the first -- goes where torchrun's argparse drops it", "[cli]") {
  // (tests/integration/test_torchrun_flags.py runs the same table through torch's parsers.)
  struct Case {
    std::vector<std::string> args;
    std::string script;
    std::vector<std::string> script_args;
  };
  const Case cases[] = {
      {{"x.py", "--", "--depth=24"}, "x.py", {"--depth=24"}},
      {{"-m", "scripts.base_train", "--", "--depth=24"}, "scripts.base_train", {"--depth=24"}},
      {{"--", "x.py", "--", "a"}, "x.py", {"--", "a"}},
      {{"x.py", "a", "--", "b"}, "x.py", {"a", "--", "b"}},
      {{"x.py", "--"}, "x.py", {}},
      {{"x.py", "--", "--"}, "x.py", {"--"}},
      {{"x.py", "--", "a", "--", "b"}, "x.py", {"a", "--", "b"}},
      {{"--nnodes", "1", "--", "x.py", "--", "a"}, "x.py", {"--", "a"}},
      {{"--", "--", "x.py"}, "--", {"x.py"}},
      {{"--", "-m", "mod"}, "-m", {"mod"}},
  };
  for (const Case& c : cases) {
    INFO(Join(c.args, " "));
    const CliOptions o = Parse(c.args);
    CHECK(o.script == c.script);
    CHECK(o.script_args == c.script_args);
  }
  CHECK(Parse({"-m", "mod", "--", "x"}).module);
  CHECK_FALSE(Parse({"--", "-m", "mod"}).module);
}

TEST_CASE("cli: value shapes", "[cli]") {
  using K = NprocPerNode::Kind;
  CHECK(Parse({"--nproc-per-node", "auto", "x"}).nproc_per_node->kind == K::kAuto);
  CHECK(Parse({"--nproc-per-node", "gpu", "x"}).nproc_per_node->kind == K::kGpu);
  CHECK(Parse({"--nproc-per-node", "cpu", "x"}).nproc_per_node->kind == K::kCpu);
  CHECK(Parse({"--nnodes", "4:4", "x"}).nnodes == 4);
  CHECK(Parse({"--rdzv-endpoint", "[fd00::1]:29401", "x"}).rdzv_endpoint ==
        Endpoint{"fd00::1", 29401});
  CHECK(Parse({"--rdzv-endpoint", "[::1]", "x"}).rdzv_endpoint == Endpoint{"::1", std::nullopt});
  CHECK(Parse({"--rdzv-endpoint", "node0", "x"}).rdzv_endpoint == Endpoint{"node0", std::nullopt});
  CHECK(Parse({"--master-addr", "[fd00::2]", "x"}).master_addr == "fd00::2");
  CHECK(Parse({"--bind", "all", "x"}).bind == DeviceBind::kAll);
  CHECK(Parse({"--stdin", "null", "x"}).stdin_mode == StdinMode::kNull);
  CHECK(Parse({"--format", "table", "x"}).format == DryRunFormat::kTable);
  CHECK(Parse({"--format", "env", "x"}).format == DryRunFormat::kEnv);
  CHECK(Parse({"--local-ranks-filter", "3,1,3", "x"}).local_ranks_filter == std::vector<int>{1, 3});
  StdStreams tee = *Parse({"--tee", "0:3,2:1", "x"}).tee;
  CHECK(tee.For(0) == 3);
  CHECK(tee.For(1) == 0);
  CHECK(tee.For(2) == 1);
  CHECK(Parse({"--redirects", "2", "x"}).redirects->For(5) == 2);
  CHECK(Parse({"--grace-period", "0", "x"}).grace_period == 0.0);
  CHECK(Parse({"--env", "EMPTY=", "x"}).env ==
        std::vector<std::pair<std::string, std::string>>{{"EMPTY", ""}});
}

TEST_CASE("cli: the etcd backend, its endpoint list and its --rdzv-conf keys", "[cli]") {
  for (const char* backend : {"etcd", "etcd-v2"}) {
    CHECK(Parse({"--rdzv-backend", backend, "x"}).rdzv_backend == backend);
  }
  CliOptions list = Parse({"--rdzv-endpoint", "e1:2379,e2:2379", "x"});
  CHECK(list.rdzv_endpoint_list == "e1:2379,e2:2379");
  CHECK_FALSE(list.rdzv_endpoint);
  CliOptions url = Parse({"--rdzv-endpoint", "https://e1:2379", "x"});
  CHECK(url.rdzv_endpoint_list == "https://e1:2379");
  // The last --rdzv-endpoint wins, list or not.
  CliOptions last = Parse({"--rdzv-endpoint", "e1,e2", "--rdzv-endpoint", "n0:29400", "x"});
  CHECK_FALSE(last.rdzv_endpoint_list);
  CHECK(last.rdzv_endpoint == Endpoint{"n0", 29400});
  CHECK(Parse({"--rdzv-conf",
               "protocol=HTTPS,cacert=/ca.pem,cert=/c.pem,key=/k.pem,etcd_prefix=/t,user=u,"
               "password=p,lease_ttl=30,read_timeout=4",
               "x"})
            .rdzv_conf == std::map<std::string, std::string>{{"protocol", "HTTPS"},
                                                             {"cacert", "/ca.pem"},
                                                             {"cert", "/c.pem"},
                                                             {"key", "/k.pem"},
                                                             {"etcd_prefix", "/t"},
                                                             {"user", "u"},
                                                             {"password", "p"},
                                                             {"lease_ttl", "30"},
                                                             {"read_timeout", "4"}});
  // etcd-v2's names and our aliases are accepted as given.
  CHECK(Parse({"--rdzv-conf", "ca_cert=/a,ssl_cert=/b,ssl_cert_key=/c,username=u,password_file=/p",
               "x"})
            .rdzv_conf.size() == 5);
  CHECK(Parse({"x"}, {{"PET_RDZV_BACKEND", "etcd-v2"}}).rdzv_backend == "etcd-v2");
}

TEST_CASE("cli: --help and --version are results, printed by the caller", "[cli]") {
  for (const std::string flag : {"--help", "-h"}) {
    auto help = ParseCli({"--nproc-per-node", "2", flag}, {});
    REQUIRE(help.ok());
    CHECK(help->action == CliAction::kHelp);
    CHECK(help->text.find("Usage: gculaunch [OPTIONS] SCRIPT [SCRIPT_ARGS...]") !=
          std::string::npos);
    CHECK(help->text.find("--nproc-per-node,--nproc_per_node") != std::string::npos);
    CHECK(help->text.find("Examples:") != std::string::npos);
    CHECK(help->text.find("PET_NPROC_PER_NODE") != std::string::npos);
  }
  auto version = ParseCli({"--version"}, {});
  REQUIRE(version.ok());
  CHECK(version->action == CliAction::kVersion);
  CHECK(version->text == std::string("gculaunch ") + GCULAUNCH_VERSION + "\n");
}

TEST_CASE("cli: exact one-line errors for bad input", "[cli]") {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{},
       "gculaunch: no SCRIPT given (fix: gculaunch [OPTIONS] SCRIPT [SCRIPT_ARGS...]; see "
       "gculaunch --help)"},
      {{"--standalone"},
       "gculaunch: no SCRIPT given (fix: gculaunch [OPTIONS] SCRIPT "
       "[SCRIPT_ARGS...]; see gculaunch --help)"},
      {{"--nproc-per-mode", "2", "x.py"},
       "gculaunch: unknown flag '--nproc-per-mode' (fix: did you mean --nproc-per-node? "
       "(gculaunch's flags go before SCRIPT))"},
      {{"--frobnicate=3", "x.py"},
       "gculaunch: unknown flag '--frobnicate' (fix: see gculaunch --help (gculaunch's flags go "
       "before SCRIPT))"},
      {{"--nnodes"},
       "gculaunch: --nnodes needs a value (fix: write it as --nnodes N; see "
       "gculaunch --help)"},
      {{"--env"},
       "gculaunch: --env needs a value (fix: write it as --env KEY=VALUE; see "
       "gculaunch --help)"},
      {{"--nproc_per_node"},
       "gculaunch: --nproc-per-node needs a value (fix: write it as "
       "--nproc-per-node N|auto|gpu|cpu; see gculaunch --help)"},
      {{"--dry-run=maybe", "x.py"},
       "gculaunch: --dry-run 'maybe': this flag takes no value (fix: write just --dry-run (or "
       "--dry-run=true / --dry-run=false))"},
      {{"--nnodes", "4:1", "x.py"},
       "gculaunch: --nnodes '4:1': MIN is above MAX (fix: give MIN:MAX with MIN <= MAX, such as "
       "--nnodes 1:4)"},
      {{"--nnodes", "0", "x.py"},
       "gculaunch: --nnodes '0': expected N or MIN:MAX, positive numbers (fix: e.g. --nnodes 2)"},
      {{"--nproc-per-node", "many", "x.py"},
       "gculaunch: --nproc-per-node 'many': expected a positive number, auto, gpu or cpu (fix: "
       "e.g. --nproc-per-node 8)"},
      {{"--node-rank", "-1", "x.py"},
       "gculaunch: --node-rank '-1': expected a number >= 0 (fix: e.g. --node-rank 0)"},
      {{"--master-port", "70000", "x.py"},
       "gculaunch: --master-port '70000': expected a port number 0-65535 (fix: e.g. "
       "--master-port 29500)"},
      {{"--master-addr", "a b", "x.py"},
       "gculaunch: --master-addr 'a b': expected a host name or IP address (fix: e.g. "
       "--master-addr 10.0.0.1)"},
      {{"--rdzv-endpoint", "fd00::1:29400", "x.py"},
       "gculaunch: --rdzv-endpoint 'fd00::1:29400': an IPv6 address needs brackets: [ADDR]:PORT "
       "(fix: e.g. --rdzv-endpoint [fd00::1]:29400)"},
      {{"--rdzv-endpoint", "node0:http", "x.py"},
       "gculaunch: --rdzv-endpoint 'node0:http': the port must be a number 0-65535 (fix: e.g. "
       "--rdzv-endpoint node0:29400)"},
      {{"--rdzv-backend", "zookeeper", "x.py"},
       "gculaunch: --rdzv-backend 'zookeeper': not supported (gculaunch accepts static and "
       "c10d, which behave the same, and etcd or etcd-v2, its etcd v3 rendezvous) (fix: use "
       "--rdzv-backend static or drop it)"},
      {{"--rdzv-conf", "protocol=ftp", "x.py"},
       "gculaunch: --rdzv-conf 'protocol=ftp': 'protocol' expects http or https (fix: e.g. "
       "--rdzv-conf protocol=https)"},
      {{"--rdzv-conf", "lease_ttl=1", "x.py"},
       "gculaunch: --rdzv-conf 'lease_ttl=1': 'lease_ttl' expects whole seconds, 2 to 86400 "
       "(fix: e.g. --rdzv-conf lease_ttl=10)"},
      {{"--rdzv-conf", "lease_ttl=2.5", "x.py"},
       "gculaunch: --rdzv-conf 'lease_ttl=2.5': 'lease_ttl' expects whole seconds, 2 to 86400 "
       "(fix: e.g. --rdzv-conf lease_ttl=10)"},
      {{"--rdzv-conf", "etcd_prefix=jobs", "x.py"},
       "gculaunch: --rdzv-conf 'etcd_prefix=jobs': 'etcd_prefix' expects a key path starting "
       "with '/' (fix: e.g. --rdzv-conf etcd_prefix=/gculaunch)"},
      {{"--rdzv-conf", "user=", "x.py"},
       "gculaunch: --rdzv-conf 'user=': 'user' needs a value (fix: e.g. --rdzv-conf "
       "user=trainer)"},
      {{"--rdzv-conf", "join_timeout=soon", "x.py"},
       "gculaunch: --rdzv-conf 'join_timeout=soon': 'join_timeout' expects seconds (fix: e.g. "
       "--rdzv-conf join_timeout=900)"},
      {{"--rdzv-conf", "timeout", "x.py"},
       "gculaunch: --rdzv-conf 'timeout': expected KEY=VALUE[,KEY=VALUE...] (fix: e.g. "
       "--rdzv-conf join_timeout=900)"},
      {{"--run-id", "my job", "x.py"},
       "gculaunch: --run-id 'my job': expected letters, digits, '.', '_' or '-' (fix: e.g. "
       "--run-id job-42)"},
      {{"--rdzv-timeout", "0", "x.py"},
       "gculaunch: --rdzv-timeout '0': expected seconds (a number > 0) (fix: e.g. --rdzv-timeout "
       "900)"},
      {{"--rdzv-timeout", "soon", "x.py"},
       "gculaunch: --rdzv-timeout 'soon': expected seconds (a number > 0) (fix: e.g. "
       "--rdzv-timeout 900)"},
      {{"--node-timeout", "soon", "x.py"},
       "gculaunch: --node-timeout 'soon': expected seconds (a number >= 2) (fix: e.g. "
       "--node-timeout 30)"},
      {{"--node-timeout", "1.5", "x.py"},
       "gculaunch: --node-timeout '1.5': at least 2 seconds (nodes heartbeat every second, and "
       "a node is lost after half of this at the earliest) (fix: e.g. --node-timeout 30)"},
      {{"--max-restarts", "-2", "x.py"},
       "gculaunch: --max-restarts '-2': expected a number >= 0 (fix: e.g. --max-restarts 3)"},
      {{"--grace-period", "soon", "x.py"},
       "gculaunch: --grace-period 'soon': expected seconds (a number >= 0) (fix: e.g. "
       "--grace-period 25)"},
      {{"--monitor-interval", "-1", "x.py"},
       "gculaunch: --monitor-interval '-1': expected seconds (a number >= 0) (fix: e.g. "
       "--monitor-interval 25)"},
      {{"--bind", "cards", "x.py"},
       "gculaunch: --bind 'cards': expected all or rank (fix: e.g. --bind rank)"},
      {{"--stdin", "tty", "x.py"},
       "gculaunch: --stdin 'tty': expected null or rank0 (fix: e.g. --stdin rank0)"},
      {{"--format", "yaml", "x.py"},
       "gculaunch: --format 'yaml': expected table, json or env (fix: e.g. --format json)"},
      {{"--tee", "4", "x.py"},
       "gculaunch: --tee '4': expected 0-3 or LOCAL_RANK:0-3,... (1 stdout, 2 stderr, 3 both) "
       "(fix: e.g. --tee 3)"},
      {{"--redirects", "0:3,0:1", "x.py"},
       "gculaunch: --redirects '0:3,0:1': local rank 0 is listed twice (fix: e.g. --redirects "
       "0:3,1:2)"},
      {{"--local-ranks-filter", "0,x", "x.py"},
       "gculaunch: --local-ranks-filter '0,x': expected local ranks such as 0,1,2 (fix: e.g. "
       "--local-ranks-filter 0)"},
      {{"--env", "NOVALUE", "x.py"},
       "gculaunch: --env 'NOVALUE': expected KEY=VALUE (fix: e.g. --env ECCL_DEBUG=INFO)"},
      {{"--env", "1A=x", "x.py"},
       "gculaunch: --env '1A=x': '1A' is not a valid variable name (fix: use letters, digits and "
       "'_', not starting with a digit)"},
      {{"--python", "", "x.py"},
       "gculaunch: --python '': expected PATH (fix: give a value or drop --python)"},
      {{"--worker-port", "x", "x.py"},
       "gculaunch: --worker-port 'x': expected a port number 0-65535 (fix: e.g. --worker-port "
       "29500)"},
  };
  for (const Case& c : cases) {
    CHECK(ParseError(c.args) == c.message);
  }
}

TEST_CASE("cli: every duration is at most 1e7 s, with a message naming the flag", "[cli]") {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::string limit = "at most 10000000 seconds (about 115 days)";
  const std::vector<Case> cases = {
      {{"--grace-period", "1e10", "x.py"},
       "gculaunch: --grace-period '1e10': " + limit + " (fix: e.g. --grace-period 25)"},
      {{"--grace-period", "1e8", "x.py"},
       "gculaunch: --grace-period '1e8': " + limit + " (fix: e.g. --grace-period 25)"},
      {{"--shutdown-timeout", "1e10", "x.py"},
       "gculaunch: --grace-period '1e10': " + limit + " (fix: e.g. --grace-period 25)"},
      {{"--rdzv-timeout", "1e10", "x.py"},
       "gculaunch: --rdzv-timeout '1e10': " + limit + " (fix: e.g. --rdzv-timeout 900)"},
      {{"--node-timeout", "1e10", "x.py"},
       "gculaunch: --node-timeout '1e10': " + limit + " (fix: e.g. --node-timeout 30)"},
      {{"--monitor-interval", "10000001", "x.py"},
       "gculaunch: --monitor-interval '10000001': " + limit + " (fix: e.g. --monitor-interval 25)"},
      {{"--progress-interval", "1e308", "x.py"},
       "gculaunch: --progress-interval '1e308': " + limit + " (fix: e.g. --progress-interval 25)"},
      {{"--hang-timeout", "10000000.5", "x.py"},
       "gculaunch: --hang-timeout '10000000.5': " + limit + " (fix: e.g. --hang-timeout 90s)"},
      {{"--hang-timeout", "3000h", "x.py"},  // 1.08e7 seconds
       "gculaunch: --hang-timeout '3000h': " + limit + " (fix: e.g. --hang-timeout 90s)"},
      {{"--hang-grace", "1e10ms", "x.py"},  // fine: 1e7 s; 1e11 ms is not
       ""},
      {{"--hang-grace", "1e11ms", "x.py"},
       "gculaunch: --hang-grace '1e11ms': " + limit + " (fix: e.g. --hang-grace 90s)"},
      {{"--restart-backoff", "1:1e10", "x.py"},
       "gculaunch: --restart-backoff '1:1e10': MAX is " + limit +
           " (fix: e.g. --restart-backoff 1:60)"},
      {{"--rdzv-conf", "join_timeout=1e10", "x.py"},
       "gculaunch: --rdzv-conf 'join_timeout=1e10': 'join_timeout' is " + limit +
           " (fix: e.g. --rdzv-conf join_timeout=900)"},
      {{"--rdzv-conf", "last_call_timeout=inf", "x.py"},
       "gculaunch: --rdzv-conf 'last_call_timeout=inf': 'last_call_timeout' expects seconds "
       "(fix: e.g. --rdzv-conf last_call_timeout=900)"},
      {{"--grace-period", "inf", "x.py"},
       "gculaunch: --grace-period 'inf': expected seconds (a number >= 0) (fix: e.g. "
       "--grace-period 25)"},
  };
  for (const Case& c : cases) {
    INFO(c.args[0] << " " << c.args[1]);
    if (c.message.empty()) {
      CHECK(ParseCli(c.args, {}).ok());
    } else {
      CHECK(ParseError(c.args) == c.message);
    }
  }
  // The limit itself is accepted, as are the read and lease keys' own ranges.
  CHECK(Parse({"--grace-period", "1e7", "x.py"}).grace_period == 1e7);
  CHECK(Parse({"--rdzv-timeout", "10000000", "x.py"}).rdzv_timeout == 1e7);
  CHECK(Parse({"--restart-backoff", "1:1e7", "x.py"}).restart_backoff == RestartBackoff{1, 1e7});
}

TEST_CASE("cli: --rdzv-conf keys that are not gculaunch's are kept, and warned about by name",
          "[cli]") {
  // torchrun hands every key to its backend, which ignores those it does not know.
  const CliOptions o = Parse({"--rdzv-conf", "timeout=900,overlap_timeout=600,colour=red", "x.py"});
  CHECK(o.rdzv_conf.at("overlap_timeout") == "600");
  CHECK(cli_flags::UnknownRdzvConfKeys(o) ==
        "--rdzv-conf: keys colour, overlap_timeout are not gculaunch's and ignored, as torchrun's "
        "rendezvous ignores keys it does not know");
  CHECK(cli_flags::UnknownRdzvConfKeys(Parse({"--rdzv-conf", "timeout=900", "x.py"})).empty());
  // A misspelt key is guessed at; its value (maybe a password) is never shown.
  for (const std::string value : {"pasword=S3cretPW", "user=root,lease_tll=5,password=S3cretPW"}) {
    const CliOptions typo = Parse({"--rdzv-conf", value, "x.py"});
    const std::string warning = cli_flags::UnknownRdzvConfKeys(typo);
    INFO(warning);
    CHECK(warning.find("S3c") == std::string::npos);
    CHECK(warning.find(" for ") != std::string::npos);
  }
  CHECK(cli_flags::UnknownRdzvConfKeys(Parse({"--rdzv-conf", "pasword=S3cretPW", "x.py"})) ==
        "--rdzv-conf: key pasword is not gculaunch's and ignored, as torchrun's rendezvous "
        "ignores keys it does not know (a misspelling? pasword for password)");
  // A known key keeps its check.
  CHECK(ParseError({"--rdzv-conf", "overlap_timeout=600,timeout=abc", "x.py"}) ==
        "gculaunch: --rdzv-conf 'timeout=abc': 'timeout' expects seconds (fix: e.g. --rdzv-conf "
        "timeout=900)");
}

TEST_CASE("cli: a --rdzv-conf error quotes only its item, never the password", "[cli]") {
  struct Case {
    std::string value;
    std::string message;  // the whole line; empty: only checked for the password
  };
  const std::vector<Case> cases = {
      // After password=, an unknown key may be a piece of a password holding ',': not named.
      {"user=root,password=S3cretPW,lease_tll=5",
       "gculaunch: --rdzv-conf: an item after password= is not one of the keys: a misspelt key, "
       "or a password holding ',' (fix: check the key names (--help lists them); put a password "
       "holding ',' in password_file=PATH or in GCULAUNCH_ETCD_PASSWORD)"},
      {"user=root,password=S3cretPW,timeout=abc",
       "gculaunch: --rdzv-conf 'timeout=abc': 'timeout' expects seconds (fix: e.g. --rdzv-conf "
       "timeout=900)"},
      {"password=S3cretPW,join_timeout=1e10", ""},
      {"password=S3cretPW,is_host=maybe", ""},
      {"password=S3cretPW,protocol=ftp", ""},
      {"password=S3cretPW,lease_ttl=1", ""},
      {"password=S3cretPW,etcd_prefix=x", ""},
      {"password=S3cretPW,user=", ""},
      {"S3cretPW", ""},  // no '=' at all: quoted, but it is no password= item
      {"user=root,password=",
       "gculaunch: --rdzv-conf 'password=<hidden>': 'password' needs a value (fix: e.g. "
       "--rdzv-conf password=...)"},
      // A password holding ',' (and '='): the pieces after password= are never quoted.
      {"user=root,password=S3c,retPW",
       "gculaunch: --rdzv-conf: an item after password= is not one of the keys: a misspelt key, "
       "or a password holding ',' (fix: check the key names (--help lists them); put a password "
       "holding ',' in password_file=PATH or in GCULAUNCH_ETCD_PASSWORD)"},
      {"user=root,password=S3c,ret=PW,lease_ttl=5", ""},
      {"user=root,password=S3c,=retPW", ""},
  };
  for (const Case& c : cases) {
    INFO(c.value);
    const std::string flag = ParseError({"--rdzv-conf", c.value, "x.py"});
    const std::string pet = ParseError({"x.py"}, EnvMap{{"PET_RDZV_CONF", c.value}});
    for (const std::string& message : {flag, pet}) {
      CHECK(message.rfind("gculaunch: ", 0) == 0);
      if (c.value != "S3cretPW") {
        CHECK(message.find("S3c") == std::string::npos);
        CHECK(message.find("retPW") == std::string::npos);
      }
    }
    if (!c.message.empty()) CHECK(flag == c.message);
    CHECK(pet.rfind("gculaunch: PET_RDZV_CONF", 0) == 0);
  }
}

TEST_CASE("cli: counts have a stated maximum, named in the message", "[cli]") {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--max-restarts", "2147483646", "x.py"},
       "gculaunch: --max-restarts '2147483646': at most 1000000 (fix: e.g. --max-restarts 3)"},
      {{"--max-restarts", "99999999999999999999999", "x.py"},
       "gculaunch: --max-restarts '99999999999999999999999': at most 1000000 (fix: e.g. "
       "--max-restarts 3)"},
      {{"--max-restarts", "1000001", "x.py"},
       "gculaunch: --max-restarts '1000001': at most 1000000 (fix: e.g. --max-restarts 3)"},
      {{"--nproc-per-node", "65537", "x.py"},
       "gculaunch: --nproc-per-node '65537': at most 65536 (fix: e.g. --nproc-per-node 8)"},
      {{"--nnodes", "2000000", "x.py"},
       "gculaunch: --nnodes '2000000': at most 1048576 (fix: e.g. --nnodes 2)"},
      {{"--nnodes", "1:2000000", "x.py"},
       "gculaunch: --nnodes '1:2000000': at most 1048576 nodes (fix: e.g. --nnodes 2)"},
      {{"--node-rank", "1048576", "x.py"},
       "gculaunch: --node-rank '1048576': at most 1048575 (fix: e.g. --node-rank 0)"},
      {{"--local-ranks-filter", "0,70000", "x.py"},
       "gculaunch: --local-ranks-filter '0,70000': a local rank is at most 65535 (fix: e.g. "
       "--local-ranks-filter 0)"},
      {{"--tee", "70000:3", "x.py"},
       "gculaunch: --tee '70000:3': a local rank is at most 65535 (fix: e.g. --tee 0:3,1:2)"},
  };
  for (const Case& c : cases) {
    INFO(c.args[0] << " " << c.args[1]);
    CHECK(ParseError(c.args) == c.message);
  }
  CHECK(Parse({"--max-restarts", "1000000", "x.py"}).max_restarts == 1000000);
  CHECK(Parse({"--nproc-per-node", "65536", "x.py"}).nproc_per_node->count == 65536);
}

TEST_CASE("cli: --restart-backoff INITIAL:MAX, 0 or off", "[cli]") {
  CHECK(Parse({"--restart-backoff", "1:60", "x.py"}).restart_backoff == RestartBackoff{1, 60});
  CHECK(Parse({"--restart-backoff", "2:2", "x.py"}).restart_backoff == RestartBackoff{2, 2});
  CHECK(Parse({"--restart-backoff", "off", "x.py"}).restart_backoff == RestartBackoff{0, 0});
  CHECK(Parse({"--restart-backoff", "0", "x.py"}).restart_backoff == RestartBackoff{0, 0});
  CHECK(Parse({"x.py"}, EnvMap{{"PET_RESTART_BACKOFF", "off"}}).restart_backoff ==
        RestartBackoff{0, 0});
  const std::string problem =
      "expected INITIAL:MAX in seconds with 0 < INITIAL <= MAX, or off (fix: e.g. "
      "--restart-backoff 1:60)";
  for (const char* bad : {"5", "60:1", "0:60", "-1:60", "a:b", "1:", ":60", "on", "1:inf"}) {
    INFO(bad);
    CHECK(ParseError({"--restart-backoff", bad, "x.py"}) ==
          "gculaunch: --restart-backoff '" + std::string(bad) + "': " + problem);
  }
}

TEST_CASE("cli: --max-same-failures N and --progress-file PATH", "[cli]") {
  CHECK(Parse({"--max-same-failures", "0", "x.py"}).max_same_failures == 0);
  CHECK(Parse({"--max_same_failures", "7", "x.py"}).max_same_failures == 7);
  CHECK(Parse({"x.py"}, EnvMap{{"PET_MAX_SAME_FAILURES", "2"}}).max_same_failures == 2);
  CHECK(Parse({"x.py"}, EnvMap{{"PET_PROGRESS_FILE", "/ckpt/step"}}).progress_file == "/ckpt/step");
  CHECK_FALSE(Parse({"x.py"}).max_same_failures.has_value());
  for (const char* bad : {"-1", "x", "1.5", "1000001"}) {
    INFO(bad);
    CHECK(ParseError({"--max-same-failures", bad, "x.py"})
              .starts_with("gculaunch: --max-same-failures '" + std::string(bad) + "': "));
  }
  CHECK(ParseError({"--max-same-failures", "x", "x.py"}) ==
        "gculaunch: --max-same-failures 'x': expected a number >= 0 (fix: e.g. "
        "--max-same-failures 3)");
}

TEST_CASE("cli: control characters in values cannot break the one-line message", "[cli]") {
  CHECK(ParseError({"--env", "A\nB", "x.py"}) ==
        "gculaunch: --env 'A\\nB': expected KEY=VALUE (fix: e.g. --env ECCL_DEBUG=INFO)");
  CHECK(ParseError({"--bind", "all\r\x01", "x.py"}) ==
        "gculaunch: --bind 'all\\r\\x01': expected all or rank (fix: e.g. --bind rank)");
}

TEST_CASE("cli: errors from PET_ variables name the variable", "[cli]") {
  CHECK(ParseError({"x.py"}, EnvMap{{"PET_NNODES", "3:2"}}) ==
        "gculaunch: PET_NNODES '3:2': MIN is above MAX (fix: give MIN:MAX with MIN <= MAX, such "
        "as PET_NNODES=2:3)");
  CHECK(ParseError({"x.py"}, EnvMap{{"PET_NPROC_PER_NODE", "x"}}) ==
        "gculaunch: PET_NPROC_PER_NODE 'x': expected a positive number, auto, gpu or cpu (fix: "
        "e.g. PET_NPROC_PER_NODE=8)");
  CHECK(ParseError({"x.py"}, EnvMap{{"PET_STANDALONE", "yes"}}) ==
        "gculaunch: PET_STANDALONE 'yes': expected 1 or 0 (or true/false) (fix: e.g. "
        "PET_STANDALONE=1)");
  CHECK(ParseError({"x.py"}, EnvMap{{"PET_ENV", "A=1\nBROKEN"}}) ==
        "gculaunch: PET_ENV 'BROKEN': expected KEY=VALUE (fix: e.g. PET_ENV=ECCL_DEBUG=INFO)");
  // A bad PET_ variable does not matter when the command line gives the flag.
  CHECK(ParseCli({"--nnodes", "2", "x.py"}, EnvMap{{"PET_NNODES", "x:4"}}).ok());
}

namespace gculaunch {
namespace {

TEST_CASE("cli: SCRIPT is optional for subcommands that reuse the launch flags", "[cli]") {
  auto check = ParseCli({"--nproc-per-node", "2", "--format", "text"}, {},
                        CliParseMode{.script_optional = true});
  REQUIRE(check.ok());
  CHECK(check->options.script.empty());
  CHECK(check->options.nproc_per_node->count == 2);
  CHECK(check->options.format == DryRunFormat::kTable);  // "text" is another name for table
  auto with_script = ParseCli({"--device", "cpu", "train.py", "--lr", "1"}, {},
                              CliParseMode{.script_optional = true});
  REQUIRE(with_script.ok());
  CHECK(with_script->options.script == "train.py");
  CHECK(with_script->options.script_args == std::vector<std::string>{"--lr", "1"});
  auto launch = ParseCli({"--nproc-per-node", "2"}, {});
  REQUIRE_FALSE(launch.ok());
  CHECK(launch.error().what == "no SCRIPT given");
}

TEST_CASE("cli: ApplyFlagText gives a job file's values the command line's checks", "[cli]") {
  CliOptions o;
  REQUIRE(ApplyFlagText("nproc-per-node", "j.yaml:3: nproc_per_node", "auto", o).ok());
  CHECK(o.nproc_per_node->kind == NprocPerNode::Kind::kAuto);
  CHECK(o.Source("nproc-per-node") == "j.yaml:3: nproc_per_node");
  CHECK_FALSE(o.FromCommandLineForTest("nproc-per-node"));
  REQUIRE(ApplyFlagText("standalone", "j.yaml:4: standalone", "true", o).ok());
  CHECK(o.standalone);
  REQUIRE(ApplyFlagText("env", "j.yaml:5: env", "A=1", o).ok());
  CHECK(o.env == std::vector<std::pair<std::string, std::string>>{{"A", "1"}});
  CHECK(ApplyFlagText("master-port", "j.yaml:6: master_port", "http", o).error().Format() ==
        "gculaunch: j.yaml:6: master_port 'http': expected a port number 0-65535 (fix: e.g. "
        "master_port: 29500)");
  CHECK(CanonicalFlagName("nproc_per_node") == "nproc-per-node");
  CHECK(CanonicalFlagName("cpu-affinity") == "cpu-affinity");
  CHECK_FALSE(CanonicalFlagName("nprocs").has_value());
}

// A value `name` accepts: its ValueCases value, or "true" for a boolean flag; "" when neither
// table has the flag.
std::string SampleValue(const std::string& name) {
  for (const ValueCase& c : ValueCases()) {
    if (c.name == name) return c.value;
  }
  for (const BoolCase& c : BoolCases()) {
    if (c.name == name) return "true";
  }
  return "";
}

// The options a flag set, without the record of where it came from.
CliOptions Fields(CliOptions o) {
  o.given.clear();
  return o;
}

TEST_CASE("cli: every flag of the table sets a field of its own, on every path", "[cli]") {
  const std::vector<std::string> names = CanonicalFlagNames();
  const std::vector<std::string> ignored = IgnoredFlagNames();
  const auto is_ignored = [&](const std::string& name) {
    return std::find(ignored.begin(), ignored.end(), name) != ignored.end();
  };
  REQUIRE(names.size() >= 40);
  CliOptions all;
  for (const std::string& name : names) {
    INFO("--" << name);
    const std::string value = SampleValue(name);
    if (value.empty()) FAIL("--" << name << " has no case in ValueCases or BoolCases: add one");
    CliOptions alone;
    REQUIRE(ApplyFlagText(name, "test: " + name, value, alone).ok());
    REQUIRE(ApplyFlagText(name, "test: " + name, value, all).ok());
    // Accepted and ignored only when the table says so.
    CHECK((Fields(alone) == CliOptions{}) == is_ignored(name));
    // The command line and PET_* go through the same table entry as a job file.
    CliOptions command_line = Parse({"--" + name + "=" + value, "train.py"});
    command_line.script.clear();
    CHECK(Fields(command_line) == Fields(alone));
    CliOptions pet = Parse({"train.py"}, EnvMap{{PetName(name), value}});
    pet.script.clear();
    CHECK(Fields(pet) == Fields(alone));
  }
  // Leaving one flag out changes the result unless it is ignored: no flag writes a field
  // that another flag writes too.
  for (const std::string& left_out : names) {
    INFO("all flags but --" << left_out);
    CliOptions others;
    for (const std::string& name : names) {
      if (name != left_out) REQUIRE(ApplyFlagText(name, "test", SampleValue(name), others).ok());
    }
    CHECK((Fields(others) == Fields(all)) == is_ignored(left_out));
  }
}

}  // namespace
}  // namespace gculaunch

TEST_CASE("cli: --nnodes MIN:MAX is elastic, N:N is --nnodes N", "[cli]") {
  auto elastic = ParseCli({"--nnodes", "2:3", "x.py"}, EnvMap{});
  REQUIRE(elastic.ok());
  CHECK(elastic->options.nnodes == 3);
  CHECK(elastic->options.min_nodes == 2);
  auto fixed = ParseCli({"--nnodes", "2:2", "x.py"}, EnvMap{});
  REQUIRE(fixed.ok());
  CHECK(fixed->options.nnodes == 2);
  CHECK_FALSE(fixed->options.min_nodes.has_value());
  auto pet = ParseCli({"x.py"}, EnvMap{{"PET_NNODES", "1:4"}});
  REQUIRE(pet.ok());
  CHECK(pet->options.nnodes == 4);
  CHECK(pet->options.min_nodes == 1);
}

TEST_CASE("cli: --device-memory-wait: seconds >= 0, 0 turns the wait off, PET_DEVICE_MEMORY_WAIT",
          "[cli]") {
  CHECK_FALSE(Parse({"x.py"}).device_memory_wait.has_value());
  CHECK(Parse({"--device-memory-wait", "0", "x.py"}).device_memory_wait == 0.0);
  CHECK(Parse({"x.py"}, EnvMap{{"PET_DEVICE_MEMORY_WAIT", "3"}}).device_memory_wait == 3.0);
  CHECK(Parse({"--device-memory-wait=1", "x.py"}, EnvMap{{"PET_DEVICE_MEMORY_WAIT", "3"}})
            .device_memory_wait == 1.0);
  CHECK(ParseError({"--device-memory-wait=-1", "x.py"}) ==
        "gculaunch: --device-memory-wait '-1': expected seconds (a number >= 0) (fix: e.g. "
        "--device-memory-wait 25)");
}

}  // namespace
}  // namespace gculaunch

namespace gculaunch {
namespace {

TEST_CASE("cli: the exit settings are found on a command line that does not parse", "[cli]") {
  const EnvMap none;
  CHECK(ScanExitSettings({"--bad", "--exit-codes", "classes", "x.py"}, none).scheme ==
        ExitScheme::kClasses);
  CHECK(ScanExitSettings({"--exit_codes=classes", "--nnodes", "x"}, none).scheme ==
        ExitScheme::kClasses);
  CHECK(ScanExitSettings({"--exit-codes", "classes", "--exit-codes", "rank"}, none).scheme ==
        ExitScheme::kRank);
  CHECK(ScanExitSettings({"--exit-codes", "bogus"}, none).scheme == ExitScheme::kRank);
  // After "--" the words are the script's.
  CHECK(ScanExitSettings({"x.py", "--", "--exit-codes", "classes"}, none).scheme ==
        ExitScheme::kRank);
  CHECK(ScanExitSettings({"x.py"}, EnvMap{{"GCULAUNCH_EXIT_CODES", "classes"}}).scheme ==
        ExitScheme::kClasses);
  CHECK(ScanExitSettings({"x.py"}, EnvMap{{"PET_EXIT_CODES", "classes"}}).scheme ==
        ExitScheme::kClasses);
  CHECK(ScanExitSettings({"--exit-codes", "rank"}, EnvMap{{"PET_EXIT_CODES", "classes"}}).scheme ==
        ExitScheme::kRank);
  const ExitSettings log = ScanExitSettings({"--termination-log", "/t", "x.py"}, none);
  CHECK(log.termination_log == std::string("/t"));
  CHECK_FALSE(ScanExitSettings({"x.py"}, none).termination_log.has_value());
}

}  // namespace
}  // namespace gculaunch
