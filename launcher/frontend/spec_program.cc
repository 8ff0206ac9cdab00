// MakeLaunchSpec's last steps (spec_builder.h): the program each rank runs, hangs and stack
// dumps, the Python shim, the environment, output, metrics, the store's access and the rest.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "base/exit_codes.h"
#include "base/one_line.h"
#include "base/text.h"
#include "launcher/frontend/cli.h"
#include "launcher/frontend/job_file.h"
#include "launcher/frontend/platform.h"
#include "launcher/frontend/profile_catalog.h"
#include "launcher/frontend/rank_env.h"
#include "launcher/frontend/spec_builder.h"
#include "launcher/frontend/stack_hook.h"

namespace gculaunch {
namespace {

// glibc's default search path (confstr(_CS_PATH)), used when PATH is unset,
// as execvp does.
constexpr const char* kDefaultPath = "/bin:/usr/bin";

// --duplicate-stdout-filters / --duplicate-stderr-filters: the spec's filters, and warnings
// where torchrun's rules make them do less than the user likely meant.
void SetDuplicateFilters(const CliOptions& o, FilteredStream stream, LaunchSpec& spec) {
  const bool out = stream == FilteredStream::kStdout;
  const auto& given = out ? o.duplicate_stdout_filters : o.duplicate_stderr_filters;
  if (!given) return;
  (out ? spec.duplicate_stdout_filters : spec.duplicate_stderr_filters) = *given;
  const std::string name = out ? "duplicate-stdout-filters" : "duplicate-stderr-filters";
  const std::string what = out ? "stdout" : "stderr";
  if (std::find(given->begin(), given->end(), "") != given->end()) {
    spec.warnings.push_back(o.Source(name) +
                            " has an empty filter, which every line contains: all teed " + what +
                            " lines are copied, as torchrun does (drop the stray comma to copy "
                            "only matching lines; ',,' is a literal comma)");
  }
  if (FilteredLocalRanks(spec, stream).empty()) {
    spec.warnings.push_back(o.Source(name) + ": no local rank tees its " + what +
                            " and is shown on the console, so each attempt's " +
                            FilteredLogName(stream) + " stays empty, as with torchrun (add --tee " +
                            (out ? "1" : "2") + " or --tee 3)");
  }
}

}  // namespace

std::string SpecBuilder::SearchPath() const {
  for (const auto& [key, value] : o_.env) {
    if (key == "PATH") return value;  // the ranks' PATH, as the exec would see it
  }
  return env_.GetOr("PATH", kDefaultPath);
}

// Finds `name`; in a dry run a missing program becomes a note.
// `missing` for a name not found (exit 127), `not_executable` for a path that exists but
// cannot be run (exit 126), as the shell says.
Result<std::string> SpecBuilder::Resolve(const std::string& name, Error missing,
                                         Error not_executable) {
  if (auto found = files_.FindExecutable(name, SearchPath())) return *found;
  const bool exists = name.find('/') != std::string::npos && files_.FileExists(name);
  Error error = exists ? std::move(not_executable) : std::move(missing);
  error.exit_code = exists ? exit_code::kNotExecutable : exit_code::kSpawnFailed;
  if (!spec_.dry_run) return error;
  Note(error.what + "; a real launch stops here");
  return name;
}

Status SpecBuilder::Program() {
  if (o_.module && o_.no_python) {
    return Error{o_.Source("module") + " and " + o_.Source("no-python") + " conflict",
                 "drop one: -m runs SCRIPT as a Python module, --no-python runs SCRIPT as a "
                 "program"};
  }
  spec_.local_rank_arg = o_.local_rank_arg;
  std::vector<std::string>& argv = spec_.argv;
  if (o_.no_python) {
    const bool has_slash = o_.script.find('/') != std::string::npos;
    auto exe = Resolve(
        o_.script,
        has_slash ? Error{"SCRIPT '" + o_.script + "' was not found",
                          "check the path (a relative path starts in the current directory)"}
                  : Error{"SCRIPT '" + o_.script + "' was not found on PATH",
                          "give its path, e.g. ./" + o_.script},
        Error{"SCRIPT '" + o_.script + "' is not an executable file",
              "make it executable (chmod +x), or drop --no-python to run it with Python"});
    if (!exe.ok()) return exe.error();
    spec_.executable = *exe;
    argv.push_back(o_.script);
  } else {
    std::string name = "python3";
    std::string source;
    if (o_.python) {
      name = *o_.python;
      source = o_.Source("python");
    } else if (!env_.GetOr("PYTHON_EXEC", "").empty()) {
      name = env_.GetOr("PYTHON_EXEC", "");
      source = "PYTHON_EXEC";
    }
    const std::string fix = source.empty()            ? "install Python 3, or give --python PATH"
                            : source == "PYTHON_EXEC" ? "fix or unset PYTHON_EXEC"
                                                      : "give the path of a Python interpreter";
    const bool has_slash = name.find('/') != std::string::npos;
    Error missing{source.empty() ? "python3 was not found on PATH"
                                 : source + " '" + name +
                                       "': " + (has_slash ? "not found" : "not found on PATH"),
                  fix};
    auto python = Resolve(
        name, missing,
        Error{(source.empty() ? "python3" : source) + " '" + name + "': not an executable file",
              fix});
    if (!python.ok()) return python.error();
    spec_.python = *python;
    spec_.python_origin = source.empty() ? kPythonOnPath : source;
    spec_.executable = *python;
    Note("interpreter " + *python + " (" + spec_.python_origin + ")");
    argv = {*python, "-u"};
    if (o_.module) argv.push_back("-m");
    argv.push_back(o_.script);
  }
  if (Status ok = PythonShim(); !ok.ok()) return ok;
  if (Status ok = Hangs(); !ok.ok()) return ok;
  StackDumps();
  WarmRanks();
  // torch.distributed.launch put --local_rank right after the script.
  if (o_.local_rank_arg) argv.push_back("--local_rank=${local_rank}");
  // A job file's config for this card count replaces "{config}".
  std::string config_note;
  auto args = SelectConfig(o_, spec_.world_size, spec_.nnodes, spec_.nproc_per_node, &config_note);
  if (!args.ok()) return args.error();
  if (!config_note.empty()) Note(config_note);
  argv.insert(argv.end(), args->begin(), args->end());
  return OkStatus();
}

// --hang-timeout, --hang-grace, --on-hang (docs/command-line.md, section --hang-timeout).
Status SpecBuilder::Hangs() {
  for (const char* flag : {"hang-grace", "on-hang"}) {
    const bool given =
        std::string(flag) == "hang-grace" ? o_.hang_grace.has_value() : o_.on_hang.has_value();
    if (given && !o_.hang_timeout) {
      return Error{o_.Source(flag) + " only applies with --hang-timeout",
                   "add --hang-timeout DURATION, or drop --" + std::string(flag)};
    }
  }
  if (!o_.hang_timeout) return OkStatus();
  if (const RdzvCapabilities& can = CapabilitiesOf(spec_.rdzv); !can.hang_watch) {
    // The job-wide hang watch runs next to the store host's coordinator, which this backend
    // does not carry yet (rdzv_backend.cc says why).
    return Error{o_.Source("hang-timeout") + " is not available with --rdzv-backend " +
                     std::string(can.name) + " yet",
                 "drop --hang-timeout, or use --rdzv-backend c10d for this job"};
  }
  spec_.hang_timeout_s = *o_.hang_timeout;
  spec_.hang_grace_s = std::max(o_.hang_grace.value_or(600.0), spec_.hang_timeout_s);
  spec_.on_hang = o_.on_hang.value_or(OnHang::kStop);
  static const char* const kActions[] = {"stop the ranks (exit 6)",
                                         "restart the ranks (counts against --max-restarts)",
                                         "report it and keep running"};
  Note("--hang-timeout: " + Seconds(std::chrono::duration<double>(spec_.hang_timeout_s), -1) +
       " without progress from any rank (output, or a touch of GCULAUNCH_HEARTBEAT_FILE) "
       "after the first, or " +
       Seconds(std::chrono::duration<double>(spec_.hang_grace_s), -1) +
       " before it, is a hang: every rank's stacks are shown, then gculaunch will " +
       kActions[static_cast<int>(spec_.on_hang)]);
  if (spec_.nnodes > 1) {
    Note(
        "--hang-timeout on several nodes: node 0 decides for the whole job from every "
        "node's progress reports and gathers every node's stacks; give every node the same "
        "--hang-timeout");
  }
  return OkStatus();
}

// --stack-dumps: the hook chained before the shim's and the user's sitecustomize.
void SpecBuilder::StackDumps() {
  spec_.stack_dumps = o_.stack_dumps || o_.hang_timeout.has_value();
  if (!spec_.stack_dumps) return;
  spec_.stack_dump_signal = StackDumpSignal();
  Note(
      "--stack-dumps: each rank loads gculaunch's stack-dump hook (first on PYTHONPATH), "
      "which writes every thread's Python stack to GCULAUNCH_STACKS_FILE on signal " +
      std::to_string(spec_.stack_dump_signal) + " (SIGRTMIN+" +
      std::to_string(spec_.stack_dump_signal - SIGRTMIN) +
      "); `gculaunch stacks` asks for it; it acts only in the ranks themselves");
  if (o_.no_python) {
    Note(
        "--stack-dumps with --no-python: only a SCRIPT that execs Python itself can be "
        "dumped; other ranks are reported, never signalled");
  }
}

// --warm-ranks: Python ranks only; the standbys themselves are the launch's (standby_pool.h).
void SpecBuilder::WarmRanks() {
  spec_.preload = o_.preload.value_or(std::vector<std::string>{"torch", "torch.distributed"});
  if (!o_.warm_ranks) {
    if (o_.preload) Note(o_.Source("preload") + " is ignored without --warm-ranks");
    return;
  }
  if (o_.no_python || o_.run_path) {
    Note(std::string(o_.no_python ? "--no-python" : "--run-path") +
         ": --warm-ranks does not apply (a standby is a Python interpreter that gculaunch "
         "starts); every rank starts cold");
    return;
  }
  if (spec_.max_restarts == 0 && !RunsAsCluster(spec_)) {
    Note("--warm-ranks with --max-restarts 0 on one node: no restart, so no standby is started");
    return;
  }
  spec_.warm_ranks = true;
  Note("--warm-ranks: once an attempt's ranks run, each rank gets a standby that imports " +
       Join(spec_.preload, ", ") +
       " and waits; a restart hands it the attempt's environment (RANK, WORLD_SIZE, "
       "MASTER_ADDR/PORT, TORCHELASTIC_RESTART_COUNT, ...) instead of starting a new "
       "interpreter.  A standby that is not ready, died, or whose environment would differ "
       "beyond those variables means a cold start for that rank");
}

Status SpecBuilder::PythonShim() {
  if (o_.no_backend_fallback && !o_.python_shim) {
    return Error{o_.Source("no-backend-fallback") + " only applies with --python-shim",
                 "add --python-shim, or drop --no-backend-fallback"};
  }
  spec_.python_shim = o_.python_shim;
  spec_.backend_fallback = !o_.no_backend_fallback;
  if (!o_.python_shim) return OkStatus();
  const DeviceProfile& profile = spec_.profile;
  std::string note =
      "--python-shim: each rank loads gculaunch's sitecustomize (first on "
      "PYTHONPATH), which calls init_process_group('" +
      profile.backend + "')";
  if (profile.backend != "nccl") {
    note += profile.python_module.empty()
                ? ", makes torch.cuda.set_device/current_device/device_count harmless"
                : ", sends torch.cuda.set_device/current_device/device_count to " +
                      profile.python_module;
  }
  note += spec_.backend_fallback
              ? " and falls back to gloo if '" + profile.backend +
                    "' is missing; it acts only in the ranks themselves"
              : "; a missing '" + profile.backend + "' stops the rank (--no-backend-fallback)";
  Note(note);
  if (o_.no_python) {
    Note(
        "--python-shim with --no-python: the shim acts only if SCRIPT execs Python itself "
        "(the interpreter's parent must be gculaunch)");
  }
  return OkStatus();
}

std::string SpecBuilder::OwnedHint(const std::string& var, const DeviceProfile& profile) {
  static const std::set<std::string> kTopology = {
      "LOCAL_RANK",       "RANK",       "GROUP_RANK",       "ROLE_RANK",
      "LOCAL_WORLD_SIZE", "WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE"};
  if (kTopology.count(var) != 0) return "use --nnodes, --node-rank and --nproc-per-node";
  if (var == "MASTER_ADDR" || var == "MASTER_PORT") return "use --master-addr and --master-port";
  if (var == "ROLE_NAME") return "use --role";
  if (var == "TORCHELASTIC_RUN_ID") return "use --run-id";
  if (var == "TORCHELASTIC_MAX_RESTARTS") return "use --max-restarts";
  if (var == "TORCHELASTIC_USE_AGENT_STORE") return "use --no-agent-store for False";
  if (var == "TORCHELASTIC_ERROR_FILE") return "use --log-dir to choose where error files go";
  if (var == "TORCHELASTIC_RESTART_COUNT") return "it counts restarts; use --max-restarts";
  if (var == "GCULAUNCH_CPUS") return "use --cpu-affinity numa or spread";
  if (var.rfind("GCULAUNCH_SHIM_", 0) == 0) {
    return "it belongs to --python-shim (and --no-backend-fallback)";
  }
  if (var.rfind("GCULAUNCH_STACKS_", 0) == 0) return "it belongs to --stack-dumps";
  if (var == "GCULAUNCH_HEARTBEAT_FILE") return "it belongs to --hang-timeout";
  if (!profile.visible_env.empty() &&
      std::find(profile.visible_env.begin(), profile.visible_env.end(), var) !=
          profile.visible_env.end()) {
    const std::string& pool_var = profile.visible_env.front();
    return "choose the card pool in gculaunch's own environment (" + pool_var +
           "=0,1 gculaunch ...), and use --bind rank for one card per rank";
  }
  return "gculaunch derives it from the card pool, --bind and --device";
}

Status SpecBuilder::Environment() {
  const std::vector<std::string> owned = OwnedRankVariables(spec_.profile);
  for (const auto& [key, value] : o_.env) {
    if (std::find(owned.begin(), owned.end(), key) != owned.end()) {
      return Error{o_.Source("env") + " " + key + "=" + value + ": " + key +
                       " is set by gculaunch for each rank",
                   OwnedHint(key, spec_.profile)};
    }
  }
  spec_.extra_env = o_.env;
  bool has_omp = env_.Has("OMP_NUM_THREADS");
  for (const auto& [key, value] : o_.env) has_omp = has_omp || key == "OMP_NUM_THREADS";
  for (const auto& [key, value] : spec_.profile.env) has_omp = has_omp || key == "OMP_NUM_THREADS";
  if (!has_omp && spec_.cpu_affinity != CpuAffinity::kNone) {
    Note("OMP_NUM_THREADS = each rank's CPU count (--cpu-affinity " +
         std::string(CpuAffinityName(spec_.cpu_affinity)) +
         "; set OMP_NUM_THREADS to choose another value)");
  } else if (!has_omp && spec_.nproc_per_node > 1) {
    spec_.omp_num_threads_default = "1";
    Note(
        "OMP_NUM_THREADS=1 for every rank (torchrun's default with more than one rank per "
        "node; set OMP_NUM_THREADS to choose another value)");
  }
  spec_.error_file_parent = env_.GetOr("TORCHELASTIC_ERROR_FILE", "");
  // torchrun's watchdog contract: only the exact value 1 turns it on.
  spec_.file_timer = env_.GetOr("TORCHELASTIC_ENABLE_FILE_TIMER", "") == "1";
  if (spec_.file_timer) {
    spec_.file_timer_path = env_.GetOr("TORCHELASTIC_TIMER_FILE", "");
    Note("TORCHELASTIC_ENABLE_FILE_TIMER=1: gculaunch serves torch's file-timer watchdog on " +
         (spec_.file_timer_path.empty() ? std::string("<run directory>/watchdog_timer")
                                        : spec_.file_timer_path) +
         " (TORCHELASTIC_TIMER_FILE of every rank): a rank's expired timer sends its signal "
         "to that process, as torchrun does");
  }
  return OkStatus();
}

StdStreams SpecBuilder::LocalStreams(const std::string& name,
                                     const std::optional<StdStreams>& streams) {
  if (!streams) return StdStreams{};
  StdStreams kept = *streams;
  std::vector<int> absent;
  for (auto it = kept.per_rank.begin(); it != kept.per_rank.end();) {
    if (it->first < spec_.nproc_per_node) {
      ++it;
      continue;
    }
    absent.push_back(it->first);
    it = kept.per_rank.erase(it);
  }
  if (!absent.empty()) {
    spec_.warnings.push_back(o_.Source(name) + ": ignored the entries for local " +
                             std::string(absent.size() == 1 ? "rank " : "ranks ") +
                             JoinInts(absent, ",") +
                             ", which this node does not run (nproc-per-node is " +
                             std::to_string(spec_.nproc_per_node) + "), as torchrun does");
  }
  return kept;
}

Status SpecBuilder::Output() {
  spec_.grace_period_s = o_.grace_period.value_or(25.0);
  spec_.log_dir = o_.log_dir.value_or("");
  spec_.allow_shared_log_dir = o_.allow_shared_log_dir;
  while (spec_.log_dir.size() > 1 && spec_.log_dir.back() == '/') spec_.log_dir.pop_back();
  spec_.redirects = LocalStreams("redirects", o_.redirects);
  spec_.tee = LocalStreams("tee", o_.tee);
  if (o_.local_ranks_filter) {
    for (int rank : *o_.local_ranks_filter) {
      if (rank >= spec_.nproc_per_node) {
        return Error{o_.Source("local-ranks-filter") + " " + std::to_string(rank) +
                         ": there are only " + std::to_string(spec_.nproc_per_node) +
                         " local ranks",
                     "use local ranks 0 to " + std::to_string(spec_.nproc_per_node - 1)};
      }
    }
    spec_.console_local_ranks = *o_.local_ranks_filter;
  }
  LogLinePrefix();
  SetDuplicateFilters(o_, FilteredStream::kStdout, spec_);
  SetDuplicateFilters(o_, FilteredStream::kStderr, spec_);
  spec_.stdin_mode = o_.stdin_mode.value_or(StdinMode::kNull);
  spec_.summary_json = o_.summary_json.value_or("");
  if (o_.format && !o_.dry_run) {
    return Error{o_.Source("format") + " only applies to --dry-run",
                 "add --dry-run, or drop --format"};
  }
  spec_.dry_run_format = o_.format.value_or(DryRunFormat::kTable);
  return OkStatus();
}

// The console prefix template: the flag, else torch's variable (an empty one means the
// default there too: torch tests the template for truth).
void SpecBuilder::LogLinePrefix() {
  std::string source = o_.Source("log-line-prefix-template");
  spec_.log_line_prefix_template = o_.log_line_prefix_template.value_or("");
  if (!o_.log_line_prefix_template) {
    spec_.log_line_prefix_template = env_.GetOr(kLogLinePrefixTemplateEnv, "");
    source = kLogLinePrefixTemplateEnv;
  }
  if (spec_.log_line_prefix_template.empty()) return;
  Note(source + ": each console line of a rank starts with '" + ConsolePrefix(spec_, 0) +
       "' (rank " + std::to_string(spec_.rank_offset) + "), torch's template with ${role_name}, " +
       "${rank} and ${local_rank} replaced, instead of '[rankN]: '");
}

// --metrics-port and --metrics-addr (docs/operations.md).  The address is checked when it
// is bound: the spec does not resolve names.
Status SpecBuilder::Metrics() {
  spec_.store_max_queued = o_.store_max_queued;  // the store's bounds: any positive size
  spec_.store_max_buffered = o_.store_max_buffered;
  spec_.metrics_port = o_.metrics_port;
  if (!o_.metrics_addr) return OkStatus();
  if (!o_.metrics_port) {
    return Error{o_.Source("metrics-addr") + " only applies with --metrics-port",
                 "add --metrics-port PORT, or drop --metrics-addr"};
  }
  if (o_.metrics_addr->empty() || o_.metrics_addr->find_first_of(" \t/") != std::string::npos) {
    return Error{o_.Source("metrics-addr") + " '" + *o_.metrics_addr + "' is not an address",
                 "give a numeric address such as 127.0.0.1, 0.0.0.0 or ::"};
  }
  spec_.metrics_addr = *o_.metrics_addr;
  return OkStatus();
}

// --store-proxy (rendezvous/proxy.h, docs/multinode.md "The store proxy"): only where node 0's
// gculaunch serves the ranks' store (the agent store, a fixed store host), and only a job of
// several nodes has something to carry.  The note names the code it breaks.
Status SpecBuilder::StoreProxy() {
  if (!o_.store_proxy) return OkStatus();
  if (spec_.store_mode != StoreMode::kAgent) {
    return Error{"--store-proxy needs gculaunch's store, but --no-agent-store makes rank 0 host it",
                 "drop --no-agent-store or --store-proxy"};
  }
  if (const RdzvCapabilities& can = CapabilitiesOf(spec_.rdzv); can.elected_leader) {
    return Error{"--store-proxy is not supported with --rdzv-backend " + std::string(can.name) +
                     ": the store's host is elected per term",
                 "drop --store-proxy"};
  }
  if (spec_.nnodes <= 1) {
    Note("--store-proxy: one node has nothing to carry; its ranks reach the store directly");
    return OkStatus();
  }
  spec_.store_proxy = true;
  Note(
      "--store-proxy: on every node but node 0, MASTER_ADDR/MASTER_PORT name that node's store "
      "proxy (" +
      std::string(kProxyAddress) +
      ", a port chosen at launch), not node 0: code that opens its own stores at "
      "MASTER_ADDR:MASTER_PORT+N with rank 0 as the host (Megatron-LM's in-process restart, "
      "NVRx in-process examples, mscclpp) cannot run under it; torch's env:// and tcp:// "
      "stores, torch.distributed.rpc, gloo and NCCL can");
  return OkStatus();
}

// --job-secret-file (or GCULAUNCH_JOB_SECRET_FILE) and --store-allow (docs/security.md).
// The secret is read here, so that a missing or empty file stops the launch (and the dry
// run) with one line; it never appears in a message.  A file others may read is accepted:
// a Kubernetes Secret volume is 0644 unless its defaultMode says otherwise (the docs ask
// for 0400/0600).
Status SpecBuilder::StoreAccess() {
  if (Status proxy = StoreProxy(); !proxy.ok()) return proxy;
  if (o_.store_allow) {
    auto networks = ParseNetworkList(*o_.store_allow);
    if (!networks.ok()) {
      return Error{o_.Source("store-allow") + " " + networks.error().what, networks.error().hint};
    }
    spec_.store_allow = std::move(*networks);
  }
  std::string source = o_.Source("job-secret-file");
  std::string path = o_.job_secret_file.value_or("");
  if (path.empty()) {
    path = env_.GetOr(kJobSecretFileEnv, "");
    source = kJobSecretFileEnv;
  }
  if (path.empty()) return OkStatus();
  if (const RdzvCapabilities& can = CapabilitiesOf(spec_.rdzv); !can.job_secret) {
    Note(source + ": not used with --rdzv-backend " + std::string(can.name) + ": " +
         std::string(can.keys_protected_by));
    return OkStatus();
  }
  auto text = files_.ReadTextFile(path);
  if (!text.ok()) {
    return Error{source + " " + path + ": " + text.error().what,
                 text.error().hint.empty() ? "name a readable file holding the job's secret"
                                           : text.error().hint};
  }
  std::string secret = std::move(*text);
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.empty()) {
    return Error{source + " " + path + " is empty",
                 "put the job's secret in it, the same on every node, e.g. head -c 32 "
                 "/dev/urandom | base64 > FILE"};
  }
  spec_.job_secret_file = path;
  spec_.job_secret = std::move(secret);
  return OkStatus();
}

// gculaunch's own extras (the faulthandler, the progress interval) and the torchrun flags
// that have no effect here: each of those gets one note saying what gculaunch does.
Status SpecBuilder::Extras() {
  spec_.python_faulthandler = !o_.no_python_faulthandler;
  spec_.progress_interval_s = o_.progress_interval.value_or(30.0);
  spec_.local_addr = o_.local_addr.value_or("");
  if (o_.local_addr && spec_.nnodes == 1) {
    Note(DescribeFlag(o_, "local-addr", *o_.local_addr) +
         " has no effect on a single node (it is the address this node publishes to the "
         "others)");
  }
  if (o_.start_method) {
    Note(DescribeFlag(o_, "start-method", *o_.start_method) +
         " is accepted for torchrun compatibility and ignored: every rank is a new process "
         "(fork and exec of the interpreter), whatever the start method");
  }
  if (o_.run_path) {
    Note(o_.Source("run-path") +
         " is accepted for torchrun compatibility: torchrun would run SCRIPT inside its own "
         "interpreter; gculaunch starts " +
         (spec_.python.empty() ? std::string("SCRIPT itself (--no-python)")
                               : spec_.python + " -u SCRIPT") +
         " in each rank, so --python, PYTHON_EXEC, -m and --no-python keep their meaning");
  }
  if (o_.signals_to_handle) SignalsToHandle(*o_.signals_to_handle);
  if (o_.event_log_handler) {
    Note(DescribeFlag(o_, "event-log-handler", *o_.event_log_handler) +
         " is accepted for torchrun compatibility and ignored: gculaunch reports events on "
         "stderr and in --summary-json");
  }
  return OkStatus();
}

// --signals-to-handle: torchrun's agent stops its workers on each listed signal.  gculaunch
// always stops the ranks on SIGINT, SIGTERM, SIGHUP and SIGQUIT (an unlisted one would kill
// torchrun and orphan its workers; gculaunch never leaves ranks behind), forwards SIGUSR1/2
// unless listed, and keeps its own handling of the signals it needs (SIGCHLD, ...).
void SpecBuilder::SignalsToHandle(const std::vector<std::string>& names) {
  static const std::pair<const char*, int> kStoppable[] = {
      {"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2}, {"SIGALRM", SIGALRM}};
  static const std::set<std::string> kAlways = {"SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"};
  std::vector<std::string> stop;
  std::vector<std::string> kept;
  std::vector<std::string> missing(kAlways.begin(), kAlways.end());
  for (const std::string& name : names) {
    missing.erase(std::remove(missing.begin(), missing.end(), name), missing.end());
    if (kAlways.count(name) != 0) continue;
    auto it = std::find_if(std::begin(kStoppable), std::end(kStoppable),
                           [&](const auto& entry) { return name == entry.first; });
    if (it == std::end(kStoppable)) {
      kept.push_back(name);
    } else if (std::find(spec_.extra_stop_signals.begin(), spec_.extra_stop_signals.end(),
                         it->second) == spec_.extra_stop_signals.end()) {
      spec_.extra_stop_signals.push_back(it->second);
      stop.push_back(name);
    }
  }
  const std::string flag = DescribeFlag(o_, "signals-to-handle", Join(names, ","));
  if (!stop.empty()) Note(flag + ": " + Join(stop, ", ") + " also stop the ranks");
  if (!missing.empty()) {
    Note(flag + ": gculaunch still stops the ranks on " + Join(missing, ", ") +
         " (torchrun would die of it and leave its workers running)");
  }
  if (!kept.empty()) {
    Note(flag + ": " + Join(kept, ", ") +
         " keep gculaunch's own handling (they do not stop the ranks)");
  }
}

// --max-same-failures and --progress-file: when restarting is pointless (docs/runtime.md,
// "When restarts stop early").  The file is the ranks'; gculaunch reads it only after a
// failed attempt (launcher/run/progress_file.h), so it need not exist now.
Status SpecBuilder::LoopStop() {
  spec_.max_same_failures = o_.max_same_failures.value_or(3);
  if (!o_.progress_file) return OkStatus();
  if (spec_.max_same_failures == 0) {
    return Error{o_.Source("progress-file") + " needs --max-same-failures N, but " +
                     o_.Source("max-same-failures") + " is 0 (off)",
                 "drop --max-same-failures 0 (the default is 3), or drop --progress-file"};
  }
  spec_.progress_file = *o_.progress_file;
  Note("--progress-file " + spec_.progress_file + ": read after each failed attempt; " +
       std::to_string(spec_.max_same_failures) +
       " failed attempts in a row without a higher number there stop the restarts "
       "(--max-same-failures)" +
       (spec_.nnodes > 1 ? "; several nodes: node 0 decides from the highest number any node "
                           "read"
                         : ""));
  return OkStatus();
}

}  // namespace gculaunch

namespace gculaunch {

// --device-memory-wait (docs/runtime.md, "Device memory before a restart"): only where the
// profile reads used memory and its tool is installed; elsewhere a given value is noted.
void SpecBuilder::DeviceMemoryWait() {
  spec_.device_memory_wait_s = o_.device_memory_wait.value_or(10.0);
  const auto& health = spec_.profile.health;
  const bool can_read = health && health->memory && !spec_.health_tool_path.empty();
  if (!can_read) {
    if (o_.device_memory_wait) {
      Note(o_.Source("device-memory-wait") + ": not used (the device profile " +
           spec_.profile.name + " names no memory field, or its tool is not on PATH)");
    }
    spec_.device_memory_wait_s = 0;
    return;
  }
  if (spec_.device_memory_wait_s > 0) {
    Note("before a restart: wait up to " +
         Seconds(std::chrono::duration<double>(spec_.device_memory_wait_s), -1) + " until every " +
         "card's " + health->memory->field + " is below " +
         std::to_string(health->memory->below_mib) + " MiB");
  }
}

// The health gate before every attempt (docs/runtime.md, "Health checks"): the profile's tool
// as found on gculaunch's PATH now (a missing one is "not checked", never an error), and
// --health-check, which must exist.
Status SpecBuilder::Health() {
  if (o_.health_check_timeout && !o_.health_check) {
    return Error{o_.Source("health-check-timeout") + " only applies with --health-check",
                 "add --health-check CMD, or drop --health-check-timeout"};
  }
  spec_.sysroot = o_.sysroot.value_or("/");
  const std::string path = env_.GetOr("PATH", kDefaultPath);
  if (spec_.profile.health) {
    const std::string& tool = spec_.profile.health->tool;
    spec_.health_tool_path = files_.FindExecutable(tool, path).value_or("");
    Note(spec_.health_tool_path.empty()
             ? "health checks: the cards' device files and driver before every attempt (" + tool +
                   ": not on PATH, not checked)"
             : "health checks: " + spec_.health_tool_path + " before every attempt (" +
                   std::to_string(spec_.profile.health->fields.size()) +
                   " field(s) of the device profile), with the device files and driver");
  }
  DeviceMemoryWait();
  if (!o_.health_check) return OkStatus();
  spec_.health_check_name = *o_.health_check;
  auto found = files_.FindExecutable(*o_.health_check, path);
  if (!found) {
    return Error{o_.Source("health-check") + " '" + *o_.health_check +
                     "' is not an executable file" +
                     (o_.health_check->find('/') == std::string::npos ? " on PATH" : ""),
                 "give the path of an executable (it runs without a shell, without arguments)"};
  }
  spec_.health_check = *found;
  spec_.health_check_timeout_s = o_.health_check_timeout.value_or(30.0);
  Note("--health-check " + spec_.health_check + ": run before every attempt (at most " +
       Seconds(std::chrono::duration<double>(spec_.health_check_timeout_s), -1) +
       "); a non-zero exit makes this node step aside (exit code 5)");
  return OkStatus();
}

// --exit-codes and --termination-log: what the platform sees at the end (base/outcome.h;
// README.md, "Exit codes"; docs/kubernetes.md).  The first step: a bad scheme is reported
// before anything else.
Status SpecBuilder::ExitCodes() {
  spec_.exit_scheme = o_.exit_codes.value_or(ExitScheme::kRank);
  const std::string own = env_.GetOr("GCULAUNCH_EXIT_CODES", "");
  if (!o_.exit_codes && !own.empty()) {
    auto scheme = ExitSchemeNamed(own);
    if (!scheme) {
      return Error{"GCULAUNCH_EXIT_CODES '" + own + "': expected rank or classes",
                   "e.g. GCULAUNCH_EXIT_CODES=classes"};
    }
    spec_.exit_scheme = *scheme;
  }
  spec_.termination_log = o_.termination_log.value_or("");
  return OkStatus();
}

// --exit-barrier-timeout (TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT): node 0's wait for the other
// nodes' bye at exit.  After the topology: one node has no such wait.
Status SpecBuilder::ExitBarrier() {
  spec_.exit_barrier_timeout_s = o_.exit_barrier_timeout;
  const std::string torch = env_.GetOr("TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT", "");
  if (!spec_.exit_barrier_timeout_s && !torch.empty()) {
    char* end = nullptr;
    const double seconds = std::strtod(torch.c_str(), &end);
    if (end == torch.c_str() || *end != '\0' || !(seconds >= 0) || seconds > 1e9) {
      return Error{
          "TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT '" + torch + "': expected seconds (a number >= 0)",
          "e.g. TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT=300, or unset it"};
    }
    spec_.exit_barrier_timeout_s = seconds;
  }
  if (spec_.exit_barrier_timeout_s && !RunsAsCluster(spec_)) {
    Note(
        "--exit-barrier-timeout (TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT): one node has no exit "
        "barrier (nothing waits for other "
        "nodes at exit); it applies to node 0 of a job of several nodes");
  }
  return OkStatus();
}

}  // namespace gculaunch
