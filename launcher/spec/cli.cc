#include "launcher/spec/cli.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <set>
#include <sstream>

#include <CLI/CLI.hpp>

#include "launcher/spec/device_profile.h"
#include "base/one_line.h"
#include "base/text.h"

// The CLI11 adapter.  CLI11 only splits the command line into raw strings
// (it is told every value is TEXT); the PET_* fallback and all value checks
// are ours, so a value from the command line and the same value from PET_X
// go through one function and produce the same message (naming the source).
// CLI11's own envname() is not used: it calls getenv, and only main() may
// read the process environment.

namespace gculaunch {
namespace {

enum class Kind { kValue, kBool, kRepeat };

struct FlagDef {
  const char* name;       ///< canonical long name, without "--"
  const char* aliases;    ///< further CLI11 names, comma-separated ("" for none)
  Kind kind;
  const char* value;      ///< value shape for help and messages
  const char* group;
  const char* help;
};

// Every flag, in help order.  The '_' spelling of each name is added
// automatically; `aliases` holds other names (short forms, torchrun's
// alternatives).  PET_<NAME> uses `name`.
constexpr FlagDef kFlags[] = {
    // topology
    {"nproc-per-node", "", Kind::kValue, "N|auto|gpu|cpu", "Topology",
     "ranks on this node: a number, auto (cards in the pool; CPUs for --device cpu), gpu (cards "
     "in the pool) or cpu (CPUs); default 1"},
    {"nnodes", "", Kind::kValue, "N", "Topology",
     "number of nodes (N or N:N; elastic ranges are not supported); default 1"},
    {"node-rank", "", Kind::kValue, "N", "Topology", "this node's rank, 0..nnodes-1; default 0"},
    {"master-addr", "", Kind::kValue, "HOST", "Topology",
     "address of the rendezvous store (MASTER_ADDR); default 127.0.0.1"},
    {"master-port", "", Kind::kValue, "PORT", "Topology",
     "port of the rendezvous store (MASTER_PORT); default 29500, or chosen at launch with "
     "--standalone"},
    {"rdzv-endpoint", "", Kind::kValue, "HOST:PORT", "Topology",
     "the store as HOST:PORT or [IPv6]:PORT (instead of --master-addr/--master-port; PORT "
     "defaults to 29400)"},
    {"rdzv-backend", "", Kind::kValue, "static|c10d", "Topology",
     "accepted for torchrun compatibility; both behave the same"},
    {"rdzv-id", "", Kind::kValue, "ID", "Topology", "run id (TORCHELASTIC_RUN_ID); same as --run-id"},
    {"run-id", "", Kind::kValue, "ID", "Topology",
     "run id (TORCHELASTIC_RUN_ID); default: generated with --standalone, else \"none\""},
    {"rdzv-conf", "", Kind::kValue, "K=V,...", "Topology",
     "rendezvous settings, kept for multi-node: timeout, join_timeout, last_call_timeout, "
     "close_timeout, read_timeout (seconds), is_host (true/false)"},
    {"rdzv-timeout", "", Kind::kValue, "SECONDS", "Topology",
     "multi-node: how long nodes wait for the master node and for each other; default 900"},
    {"standalone", "", Kind::kBool, "", "Topology",
     "single node: store on 127.0.0.1, port chosen at launch (or --master-port)"},
    {"platform-world-size", "", Kind::kValue, "nodes|procs", "Topology",
     "how to read a job platform's WORLD_SIZE: nodes (default: Volcano, KubeBrain, older "
     "Kubeflow) or procs (nodes x nproc; needs --nproc-per-node N)"},
    {"max-restarts", "", Kind::kValue, "N", "Topology",
     "restart all ranks up to N times after a failure; default 0"},
    {"monitor-interval", "", Kind::kValue, "SECONDS", "Topology",
     "accepted for torchrun compatibility and ignored: gculaunch notices exits at once"},
    {"role", "", Kind::kValue, "NAME", "Topology", "ROLE_NAME of the ranks; default \"default\""},
    // program
    {"module", "-m", Kind::kBool, "", "Program",
     "SCRIPT is a Python module: run python -u -m SCRIPT ARGS"},
    {"no-python", "", Kind::kBool, "", "Program", "SCRIPT is a program: run SCRIPT ARGS directly"},
    {"python", "", Kind::kValue, "PATH", "Program",
     "the interpreter; default $PYTHON_EXEC, else python3 on PATH"},
    {"use-env", "", Kind::kBool, "", "Program",
     "accepted: LOCAL_RANK is always in the environment"},
    {"local-rank-arg", "", Kind::kBool, "", "Program",
     "also pass --local_rank=N after SCRIPT (legacy torch.distributed.launch scripts)"},
    {"python-shim", "", Kind::kBool, "", "Program",
     "load gculaunch's sitecustomize in each rank: init_process_group with the device's "
     "backend before your code, torch.cuda.set_device & co. redirected to the vendor module "
     "on non-CUDA devices, gloo if the backend is missing (for MMEngine and other CUDA-minded "
     "code)"},
    {"no-backend-fallback", "", Kind::kBool, "", "Program",
     "with --python-shim: a missing backend stops the rank instead of falling back to gloo"},
    {"job", "", Kind::kValue, "FILE.yaml", "Program",
     "a job file: script, args, flags, env and a training config per card count; flags and "
     "PET_* variables override it; SCRIPT may then be left out"},
    // devices
    {"device", "", Kind::kValue, "NAME|auto|PATH.yaml", "Devices",
     "device profile: gcu, cuda, cpu, ascend, mlu, rocm, auto (first whose cards exist, else "
     "cpu), or a profile YAML file; default auto"},
    {"bind", "", Kind::kValue, "all|rank", "Devices",
     "all: every rank sees the whole card pool (as torchrun); rank: each rank sees only its "
     "card; default all"},
    {"cpu-affinity", "", Kind::kValue, "none|numa|spread", "Devices",
     "pin each rank to CPUs: numa: its card's NUMA node, split fairly among the ranks there; "
     "spread: all CPUs split fairly; also sets OMP_NUM_THREADS to the rank's share unless you "
     "set it; default none"},
    {"env", "", Kind::kRepeat, "KEY=VALUE", "Devices",
     "set a variable for every rank (repeatable; overrides your environment and the profile)"},
    {"sysroot", "", Kind::kValue, "DIR", "Devices",
     "look for /dev and /sys below DIR (for tests and preflight checks)"},
    // supervision and output
    {"grace-period", "shutdown-timeout", Kind::kValue, "SECONDS", "Supervision",
     "time between SIGTERM and SIGKILL when stopping ranks; default 25"},
    {"no-agent-store", "", Kind::kBool, "", "Supervision",
     "rank 0 hosts the store (TORCHELASTIC_USE_AGENT_STORE=False) instead of gculaunch"},
    {"worker-port", "", Kind::kValue, "PORT", "Supervision",
     "with --no-agent-store: the port rank 0 binds (MASTER_PORT)"},
    {"log-dir", "", Kind::kValue, "DIR", "Supervision",
     "write per-rank logs and error files below DIR/<run id>"},
    {"redirects", "-r", Kind::kValue, "0-3|I:V,...", "Supervision",
     "send streams to the log files only: 1 stdout, 2 stderr, 3 both (per local rank: 0:3,1:2)"},
    {"tee", "-t", Kind::kValue, "0-3|I:V,...", "Supervision",
     "copy streams to the log files too: 1 stdout, 2 stderr, 3 both (per local rank: 0:3,1:2)"},
    {"local-ranks-filter", "", Kind::kValue, "I,J,...", "Supervision",
     "show only these local ranks' output on the console"},
    {"stdin", "", Kind::kValue, "null|rank0", "Supervision",
     "null: ranks read /dev/null; rank0: rank 0 gets gculaunch's stdin (for breakpoint())"},
    {"summary-json", "", Kind::kValue, "PATH", "Supervision",
     "write the outcome of the run (exit codes, root cause) as JSON"},
    // what to do
    {"dry-run", "", Kind::kBool, "", "Dry run",
     "print every rank's command line and the variables gculaunch sets; start nothing"},
    {"format", "", Kind::kValue, "table|json|env", "Dry run",
     "--dry-run output: table (default), json, or env (shell export lines)"},
};

std::string PetName(std::string_view name) {
  std::string out = "PET_";
  for (char c : name) out += c == '-' ? '_' : static_cast<char>(std::toupper(c));
  return out;
}

std::string Underscored(std::string_view name) {
  std::string out(name);
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

// "--nnodes 4", "PET_NNODES=4" or, for a job file's "job.yaml:3: nnodes",
// "nnodes: 4": how to write `value` for this source.
std::string Example(const std::string& source, const std::string& value) {
  if (source.rfind("PET_", 0) == 0) return source + "=" + value;
  if (source.rfind("--", 0) == 0) return source + " " + value;
  const size_t key = source.rfind(": ");
  return (key == std::string::npos ? source : source.substr(key + 2)) + ": " + value;
}

Error BadValue(const std::string& source, const std::string& value, const std::string& problem,
               const std::string& example) {
  return Error{source + " '" + value + "': " + problem, "e.g. " + Example(source, example)};
}

std::optional<int> ParseIntIn(const std::string& text, long long min, long long max) {
  auto value = ParseInteger(text);
  if (!value || *value < min || *value > max) return std::nullopt;
  return static_cast<int>(*value);
}

std::optional<double> ParseSeconds(const std::string& text) {
  double value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(value) || value < 0) {
    return std::nullopt;
  }
  return value;
}

bool HasSpace(const std::string& text) {
  return std::any_of(text.begin(), text.end(),
                     [](unsigned char c) { return std::isspace(c) != 0; });
}

bool IsRunId(const std::string& id) {
  return !id.empty() && std::all_of(id.begin(), id.end(), [](unsigned char c) {
    return std::isalnum(c) != 0 || c == '.' || c == '_' || c == '-';
  });
}

// torchrun's boolean PET_ variables are integers (non-zero = on); true/false
// are accepted too because platforms write them.
std::optional<bool> ParseBoolText(const std::string& text) {
  std::string lower;
  for (char c : text) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "true") return true;
  if (lower == "false") return false;
  if (auto value = ParseInteger(text)) return *value != 0;
  return std::nullopt;
}

Result<int> ParsePort(const std::string& source, const std::string& value) {
  auto port = ParseIntIn(value, 0, 65535);
  if (!port) return BadValue(source, value, "expected a port number 0-65535", "29500");
  return *port;
}

Result<StdStreams> ParseStdStreams(const std::string& source, const std::string& value) {
  const std::string problem =
      "expected 0-3 or LOCAL_RANK:0-3,... (1 stdout, 2 stderr, 3 both)";
  StdStreams streams;
  if (auto all = ParseIntIn(value, 0, 3)) {
    streams.all = *all;
    return streams;
  }
  for (const std::string& item : Split(value, ',')) {
    const size_t colon = item.find(':');
    if (colon == std::string::npos) return BadValue(source, value, problem, "3");
    auto rank = ParseIntIn(item.substr(0, colon), 0, 1 << 20);
    auto bits = ParseIntIn(item.substr(colon + 1), 0, 3);
    if (!rank || !bits) return BadValue(source, value, problem, "0:3,1:2");
    if (!streams.per_rank.emplace(*rank, *bits).second) {
      return BadValue(source, value, "local rank " + std::to_string(*rank) + " is listed twice",
                      "0:3,1:2");
    }
  }
  return streams;
}

Result<Endpoint> ParseEndpoint(const std::string& source, const std::string& value) {
  const std::string problem = "expected HOST:PORT or [IPv6]:PORT";
  Endpoint endpoint;
  std::string port_text;
  if (!value.empty() && value[0] == '[') {
    const size_t close = value.find(']');
    if (close == std::string::npos || close == 1) {
      return BadValue(source, value, problem, "[fd00::1]:29400");
    }
    endpoint.host = value.substr(1, close - 1);
    const std::string rest = value.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return BadValue(source, value, problem, "[fd00::1]:29400");
      port_text = rest.substr(1);
      if (port_text.empty()) return BadValue(source, value, problem, "[fd00::1]:29400");
    }
  } else {
    const size_t colon = value.find(':');
    if (colon != std::string::npos && value.find(':', colon + 1) != std::string::npos) {
      return BadValue(source, value, "an IPv6 address needs brackets: [ADDR]:PORT",
                      "[fd00::1]:29400");
    }
    endpoint.host = value.substr(0, colon);
    if (colon != std::string::npos) {
      port_text = value.substr(colon + 1);
      if (port_text.empty()) return BadValue(source, value, problem, "node0:29400");
    }
  }
  if (endpoint.host.empty() || HasSpace(endpoint.host)) {
    return BadValue(source, value, problem, "node0:29400");
  }
  if (!port_text.empty()) {
    auto port = ParseIntIn(port_text, 0, 65535);
    if (!port) {
      return BadValue(source, value, "the port must be a number 0-65535", "node0:29400");
    }
    endpoint.port = *port;
  }
  return endpoint;
}

Status ParseRdzvConf(const std::string& source, const std::string& value, CliOptions& o) {
  static const std::set<std::string> kSeconds = {"timeout", "join_timeout", "last_call_timeout",
                                                 "close_timeout", "read_timeout"};
  const std::string keys =
      "accepted keys: timeout, join_timeout, last_call_timeout, close_timeout, read_timeout, "
      "is_host";
  o.rdzv_conf.clear();
  for (const std::string& item : Split(value, ',')) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      return BadValue(source, value, "expected KEY=VALUE[,KEY=VALUE...]", "join_timeout=900");
    }
    const std::string key = item.substr(0, eq);
    const std::string val = item.substr(eq + 1);
    if (kSeconds.count(key) != 0) {
      if (!ParseSeconds(val)) {
        return BadValue(source, value, "'" + key + "' expects seconds", key + "=900");
      }
    } else if (key == "is_host") {
      if (!ParseBoolText(val)) {
        return BadValue(source, value, "'is_host' expects true or false", "is_host=true");
      }
    } else {
      return Error{source + " '" + value + "': unknown key '" + key + "'", keys};
    }
    o.rdzv_conf[key] = val;
  }
  return OkStatus();
}

// Applies one value-taking flag (from the command line or PET_*).
Status ApplyValue(const FlagDef& def, const std::string& source, const std::string& value,
                  CliOptions& o) {
  const std::string name = def.name;
  // An empty PET_ variable counts as unset, so this only catches --flag ''.
  if (value.empty()) {
    return Error{source + " '': expected " + std::string(def.value),
                 "give a value or drop " + source};
  }
  if (name == "nproc-per-node") {
    NprocPerNode n;
    if (value == "auto") {
      n.kind = NprocPerNode::Kind::kAuto;
    } else if (value == "gpu") {
      n.kind = NprocPerNode::Kind::kGpu;
    } else if (value == "cpu") {
      n.kind = NprocPerNode::Kind::kCpu;
    } else if (auto count = ParseIntIn(value, 1, 1 << 16)) {
      n.count = *count;
    } else {
      return BadValue(source, value, "expected a positive number, auto, gpu or cpu", "8");
    }
    o.nproc_per_node = n;
  } else if (name == "nnodes") {
    const size_t colon = value.find(':');
    const std::string problem = "expected a positive number N (or N:N)";
    if (colon == std::string::npos) {
      auto n = ParseIntIn(value, 1, 1 << 20);
      if (!n) return BadValue(source, value, problem, "2");
      o.nnodes = *n;
    } else {
      auto min = ParseIntIn(value.substr(0, colon), 1, 1 << 20);
      auto max = ParseIntIn(value.substr(colon + 1), 1, 1 << 20);
      if (!min || !max) return BadValue(source, value, problem, "2");
      if (*min != *max) {
        return Error{source + " '" + value + "': elastic ranges are not supported",
                     "give a fixed count such as " + Example(source, std::to_string(*max))};
      }
      o.nnodes = *min;
    }
  } else if (name == "node-rank") {
    auto rank = ParseIntIn(value, 0, 1 << 20);
    if (!rank) return BadValue(source, value, "expected a number >= 0", "0");
    o.node_rank = *rank;
  } else if (name == "master-addr") {
    std::string addr = value;
    if (addr.size() > 2 && addr.front() == '[' && addr.back() == ']') {
      addr = addr.substr(1, addr.size() - 2);
    }
    if (addr.empty() || HasSpace(addr)) {
      return BadValue(source, value, "expected a host name or IP address", "10.0.0.1");
    }
    o.master_addr = addr;
  } else if (name == "master-port") {
    auto port = ParsePort(source, value);
    if (!port.ok()) return port.error();
    o.master_port = *port;
  } else if (name == "worker-port") {
    auto port = ParsePort(source, value);
    if (!port.ok()) return port.error();
    o.worker_port = *port;
  } else if (name == "rdzv-endpoint") {
    auto endpoint = ParseEndpoint(source, value);
    if (!endpoint.ok()) return endpoint.error();
    o.rdzv_endpoint = *endpoint;
  } else if (name == "rdzv-backend") {
    if (value != "static" && value != "c10d") {
      return Error{source + " '" + value +
                       "': not supported (gculaunch accepts static and c10d, which behave the "
                       "same)",
                   "use " + Example(source, "static") + " or drop it"};
    }
    o.rdzv_backend = value;
  } else if (name == "rdzv-id" || name == "run-id") {
    if (!IsRunId(value)) {
      return BadValue(source, value, "expected letters, digits, '.', '_' or '-'", "job-42");
    }
    (name == "rdzv-id" ? o.rdzv_id : o.run_id) = value;
  } else if (name == "platform-world-size") {
    if (value != "nodes" && value != "procs") {
      return BadValue(source, value, "expected nodes or procs", "procs");
    }
    o.platform_world_size =
        value == "nodes" ? PlatformWorldSize::kNodes : PlatformWorldSize::kProcs;
  } else if (name == "rdzv-conf") {
    return ParseRdzvConf(source, value, o);
  } else if (name == "max-restarts") {
    auto n = ParseIntIn(value, 0, 1 << 20);
    if (!n) return BadValue(source, value, "expected a number >= 0", "3");
    o.max_restarts = *n;
  } else if (name == "rdzv-timeout") {
    auto seconds = ParseSeconds(value);
    if (!seconds || *seconds <= 0) {
      return BadValue(source, value, "expected seconds (a number > 0)", "900");
    }
    o.rdzv_timeout = *seconds;
  } else if (name == "monitor-interval" || name == "grace-period") {
    auto seconds = ParseSeconds(value);
    if (!seconds) return BadValue(source, value, "expected seconds (a number >= 0)", "25");
    (name == "grace-period" ? o.grace_period : o.monitor_interval) = *seconds;
  } else if (name == "role") {
    if (value.empty() || HasSpace(value)) {
      return BadValue(source, value, "expected a name without spaces", "trainer");
    }
    o.role = value;
  } else if (name == "python") {
    o.python = value;
  } else if (name == "job") {
    o.job = value;
  } else if (name == "log-dir") {
    o.log_dir = value;
  } else if (name == "summary-json") {
    o.summary_json = value;
  } else if (name == "sysroot") {
    o.sysroot = value;
  } else if (name == "device") {
    o.device = value;
  } else if (name == "redirects" || name == "tee") {
    auto streams = ParseStdStreams(source, value);
    if (!streams.ok()) return streams.error();
    (name == "tee" ? o.tee : o.redirects) = *streams;
  } else if (name == "local-ranks-filter") {
    std::vector<int> ranks;
    for (const std::string& item : Split(value, ',')) {
      auto rank = ParseIntIn(item, 0, 1 << 20);
      if (!rank) return BadValue(source, value, "expected local ranks such as 0,1,2", "0");
      ranks.push_back(*rank);
    }
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    o.local_ranks_filter = ranks;
  } else if (name == "bind") {
    if (value != "all" && value != "rank") {
      return BadValue(source, value, "expected all or rank", "rank");
    }
    o.bind = value == "all" ? DeviceBind::kAll : DeviceBind::kRank;
  } else if (name == "cpu-affinity") {
    if (value == "none") {
      o.cpu_affinity = CpuAffinity::kNone;
    } else if (value == "numa") {
      o.cpu_affinity = CpuAffinity::kNuma;
    } else if (value == "spread") {
      o.cpu_affinity = CpuAffinity::kSpread;
    } else {
      return BadValue(source, value, "expected none, numa or spread", "numa");
    }
  } else if (name == "stdin") {
    if (value != "null" && value != "rank0") {
      return BadValue(source, value, "expected null or rank0", "rank0");
    }
    o.stdin_mode = value == "null" ? StdinMode::kNull : StdinMode::kRank0;
  } else if (name == "format") {
    if (value == "table" || value == "text") {
      o.format = DryRunFormat::kTable;
    } else if (value == "json") {
      o.format = DryRunFormat::kJson;
    } else if (value == "env") {
      o.format = DryRunFormat::kEnv;
    } else {
      return BadValue(source, value, "expected table, json or env", "json");
    }
  }
  return OkStatus();
}

Status ApplyEnv(const std::string& source, const std::string& item, CliOptions& o) {
  const size_t eq = item.find('=');
  if (eq == std::string::npos) {
    return BadValue(source, item, "expected KEY=VALUE", "ECCL_DEBUG=INFO");
  }
  const std::string key = item.substr(0, eq);
  if (!IsEnvName(key)) {
    return Error{source + " '" + item + "': '" + key + "' is not a valid variable name",
                 "use letters, digits and '_', not starting with a digit"};
  }
  o.env.emplace_back(key, item.substr(eq + 1));
  return OkStatus();
}

void SetBool(const FlagDef& def, bool value, CliOptions& o) {
  const std::string name = def.name;
  if (name == "standalone") o.standalone = value;
  if (name == "module") o.module = value;
  if (name == "no-python") o.no_python = value;
  if (name == "use-env") o.use_env = value;
  if (name == "local-rank-arg") o.local_rank_arg = value;
  if (name == "python-shim") o.python_shim = value;
  if (name == "no-backend-fallback") o.no_backend_fallback = value;
  if (name == "no-agent-store") o.no_agent_store = value;
  if (name == "dry-run") o.dry_run = value;
}

Error UnknownFlag(const std::string& arg) {
  const std::string flag = arg.substr(0, arg.find('='));
  std::string best;
  size_t best_distance = 3;  // suggest only close matches
  for (const FlagDef& def : kFlags) {
    for (const std::string& candidate : {std::string(def.name), Underscored(def.name)}) {
      const size_t d = EditDistance(flag, "--" + candidate);
      if (d < best_distance) {
        best_distance = d;
        best = "--" + std::string(def.name);
      }
    }
  }
  std::string hint = best.empty() ? "see gculaunch --help" : "did you mean " + best + "?";
  hint += " (gculaunch's flags go before SCRIPT)";
  return Error{"unknown flag '" + flag + "'", hint};
}

// Usage line with SCRIPT: CLI11's own usage line knows nothing of the
// prefix-command positional part.
// It also puts the usage line before the description.
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_description(const CLI::App* /*app*/) const override { return ""; }
  std::string make_usage(const CLI::App* app, std::string /*name*/) const override {
    return "Usage: gculaunch [OPTIONS] SCRIPT [SCRIPT_ARGS...]\n\n" + app->get_description() +
           "\n";
  }
};

constexpr const char* kDescription =
    "gculaunch starts one training process (rank) per accelerator card on this node, gives each "
    "the environment torchrun would (LOCAL_RANK, RANK, WORLD_SIZE, MASTER_ADDR, ...) plus the "
    "card's, supervises them and tears everything down.";

constexpr const char* kFooter = R"(Examples:
  gculaunch --standalone --nproc-per-node 4 --device cpu examples/allreduce.py
  gculaunch --nproc-per-node 8 train.py cfg.py          8 ranks, GCU cards found in /dev
  gculaunch --nproc-per-node auto --bind rank train.py  one card per rank
  gculaunch --dry-run --device gcu --nproc-per-node 8 --format json train.py
  gculaunch --nnodes 2 --node-rank 1 --master-addr node0 --nproc-per-node 8 train.py
  gculaunch --no-python --nproc-per-node 2 ./run.sh --rank-arg '${local_rank}'

Every flag can also come from PET_<FLAG> (PET_NPROC_PER_NODE=8); the command line wins.
Everything from SCRIPT on goes to the script untouched; ${local_rank} is replaced per rank.
A card pool already set in the environment (TOPS_VISIBLE_DEVICES=4,5,6,7) is honoured.
Exit codes: 0 success; the first failing rank's code (128+signal if killed); 2 usage error;
3 rendezvous failed; 4 node lost; 5 ranks could not be killed; 70 internal error.)";

void AddFlags(CLI::App& app, std::map<std::string, std::string>& values,
              std::map<std::string, std::vector<std::string>>& lists,
              std::map<std::string, bool>& flags, std::map<std::string, CLI::Option*>& options) {
  for (const FlagDef& def : kFlags) {
    std::string names = "--" + std::string(def.name);
    if (Underscored(def.name) != def.name) names += ",--" + Underscored(def.name);
    for (const std::string& alias : Split(def.aliases, ',')) {
      if (alias.empty()) continue;
      if (alias[0] == '-') {
        names += "," + alias;
      } else {
        names += ",--" + alias;
        if (Underscored(alias) != alias) names += ",--" + Underscored(alias);
      }
    }
    std::string help = def.help;
    help += " [" + PetName(def.name) + "]";
    CLI::Option* option = nullptr;
    switch (def.kind) {
      case Kind::kBool:
        option = app.add_flag(names, flags[def.name], help);
        break;
      case Kind::kValue:
        option = app.add_option(names, values[def.name], help)
                     ->type_name(def.value)
                     ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
        break;
      case Kind::kRepeat:
        option = app.add_option(names, lists[def.name], help)
                     ->type_name(def.value)
                     ->expected(1)
                     ->allow_extra_args(false)
                     ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
        break;
    }
    option->group(def.group);
    options[def.name] = option;
  }
}

const FlagDef* FlagNamed(const std::string& flag) {
  for (const FlagDef& def : kFlags) {
    if (flag == "--" + std::string(def.name) || flag == "--" + Underscored(def.name)) return &def;
  }
  return nullptr;
}

// Converts a CLI11 parse error into our one-line Error.  CLI11 names the flag
// by its first long name; the two messages users meet are reworded.
Error FromCli11(const CLI::ParseError& e) {
  const std::string message = e.what();
  if (e.get_name() == "ArgumentMismatch") {
    // "--nnodes: 1 required TEXT missing"
    const std::string flag = message.substr(0, message.find(':'));
    if (const FlagDef* def = FlagNamed(flag)) {
      return Error{flag + " needs a value",
                   "write it as " + flag + " " + def->value + "; see gculaunch --help"};
    }
  }
  if (e.get_name() == "ConversionError") {
    // "Could not convert: --dry-run = maybe": a value given to a boolean flag.
    const std::string prefix = "Could not convert: ";
    const size_t eq = message.find(" = ");
    if (message.rfind(prefix, 0) == 0 && eq != std::string::npos) {
      const std::string flag = message.substr(prefix.size(), eq - prefix.size());
      return Error{flag + " '" + message.substr(eq + 3) + "': this flag takes no value",
                   "write just " + flag + " (or " + flag + "=true / " + flag + "=false)"};
    }
  }
  return Error{message, "see gculaunch --help"};
}

}  // namespace

int StdStreams::For(int local_rank) const {
  if (per_rank.empty()) return all;
  auto it = per_rank.find(local_rank);
  return it == per_rank.end() ? 0 : it->second;
}

std::string CliOptions::Source(std::string_view name) const {
  auto it = given.find(std::string(name));
  return it == given.end() ? "--" + std::string(name) : it->second;
}

bool CliOptions::FromCommandLine(std::string_view name) const {
  auto it = given.find(std::string(name));
  return it != given.end() && it->second.rfind("--", 0) == 0;
}

namespace {

Result<CliResult> Parse(const std::vector<std::string>& args, const EnvMap& env,
                        const CliParseMode& mode) {
  CLI::App app(kDescription, "gculaunch");
  bool version = false;
  std::map<std::string, std::string> values;
  std::map<std::string, std::vector<std::string>> lists;
  std::map<std::string, bool> flags;
  std::map<std::string, CLI::Option*> options;

  CliResult result;
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.formatter(std::make_shared<HelpFormatter>());
    app.get_formatter()->column_width(44);
    app.prefix_command();
    app.footer(kFooter);
    app.add_flag("--version", version, "print gculaunch's version and exit");
    AddFlags(app, values, lists, flags, options);
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    result.action = CliAction::kHelp;
    result.text = app.help();
    return result;
  } catch (const CLI::ParseError& e) {
    return FromCli11(e);
  } catch (const CLI::Error& e) {
    return Error{std::string("internal error in the command-line parser: ") + e.what(),
                 "please report this as a gculaunch bug"};
  }
  if (version) {
    result.action = CliAction::kVersion;
    result.text = "gculaunch " GCULAUNCH_VERSION "\n";
    return result;
  }

  CliOptions& o = result.options;
  std::vector<std::string> rest = app.remaining();
  if (!rest.empty() && rest.front() == "--") rest.erase(rest.begin());
  // With a job file the script may come from the file (MakeLaunchSpec merges it).
  const bool has_job = options["job"]->count() > 0 || !env.GetOr(PetName("job"), "").empty();
  if (rest.empty() && !mode.script_optional && !has_job) {
    return Error{"no SCRIPT given",
                 "gculaunch [OPTIONS] SCRIPT [SCRIPT_ARGS...]; see gculaunch --help"};
  }
  if (!rest.empty()) {
    if (rest.front().size() > 1 && rest.front()[0] == '-') return UnknownFlag(rest.front());
    o.script = rest.front();
    o.script_args.assign(rest.begin() + 1, rest.end());
  }

  for (const FlagDef& def : kFlags) {
    const bool on_command_line = options[def.name]->count() > 0;
    const std::string pet = PetName(def.name);
    const std::string pet_value = env.GetOr(pet, "");
    if (!on_command_line && pet_value.empty()) continue;
    const std::string source = on_command_line ? "--" + std::string(def.name) : pet;
    o.given[def.name] = source;
    Status applied = OkStatus();
    switch (def.kind) {
      case Kind::kBool:
        if (on_command_line) {
          SetBool(def, flags[def.name], o);
        } else {
          auto flag = ParseBoolText(pet_value);
          if (!flag) {
            return Error{pet + " '" + pet_value + "': expected 1 or 0 (or true/false)",
                         "e.g. " + pet + "=1"};
          }
          SetBool(def, *flag, o);
        }
        break;
      case Kind::kValue:
        applied = ApplyValue(def, source, on_command_line ? values[def.name] : pet_value, o);
        break;
      case Kind::kRepeat: {
        const std::vector<std::string> items =
            on_command_line ? lists[def.name] : Split(pet_value, '\n');
        for (const std::string& item : items) {
          if (!on_command_line && item.empty()) continue;
          applied = ApplyEnv(source, item, o);
          if (!applied.ok()) break;
        }
        break;
      }
    }
    if (!applied.ok()) return applied.error();
  }
  return result;
}

}  // namespace

std::optional<std::string> CanonicalFlagName(std::string_view name) {
  for (const FlagDef& def : kFlags) {
    if (name == def.name || name == Underscored(def.name)) return std::string(def.name);
  }
  return std::nullopt;
}

std::vector<std::string> CanonicalFlagNames() {
  std::vector<std::string> names;
  for (const FlagDef& def : kFlags) names.emplace_back(def.name);
  return names;
}

Status ApplyFlagText(std::string_view flag, const std::string& source, const std::string& value,
                     CliOptions& options) {
  const FlagDef* def = nullptr;
  for (const FlagDef& candidate : kFlags) {
    if (flag == candidate.name) def = &candidate;
  }
  if (def == nullptr) {
    return Error{"internal error: '" + std::string(flag) + "' is not a flag",
                 "please report this as a gculaunch bug"};
  }
  options.given[def->name] = source;
  Status applied = OkStatus();
  switch (def->kind) {
    case Kind::kBool: {
      auto on = ParseBoolText(value);
      if (!on) {
        return Error{source + " '" + value + "': expected true or false",
                     "e.g. " + Example(source, "true")};
      }
      SetBool(*def, *on, options);
      break;
    }
    case Kind::kValue:
      applied = ApplyValue(*def, source, value, options);
      break;
    case Kind::kRepeat:
      applied = ApplyEnv(source, value, options);
      break;
  }
  if (!applied.ok()) return OneLine(applied.error());
  return OkStatus();
}

Result<CliResult> ParseCli(const std::vector<std::string>& args, const EnvMap& env,
                          const CliParseMode& mode) {
  auto result = Parse(args, env, mode);
  if (!result.ok()) return OneLine(result.error());
  return result;
}

std::string DescribeFlag(const CliOptions& options, std::string_view name,
                         const std::string& value) {
  const std::string source = options.Source(name);
  return source.rfind("PET_", 0) == 0 ? source + "=" + value : source + " " + value;
}

}  // namespace gculaunch
