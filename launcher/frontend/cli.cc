#include "launcher/frontend/cli.h"

#include <CLI/CLI.hpp>
#include <algorithm>

#include "base/one_line.h"
#include "base/text.h"
#include "launcher/frontend/cli_apply.h"

// The CLI11 adapter.  CLI11 only splits the command line into raw strings
// (it is told every value is TEXT); the PET_* fallback and all value checks
// are ours, so a value from the command line and the same value from PET_X
// go through one function and produce the same message (naming the source).
// CLI11's own envname() is not used: it calls getenv, and only main() may
// read the process environment.
//
// Each flag is one row of kFlags, and the row names the function that applies it: the
// command line, PET_* and job files (ApplyFlagText) all go through that function.  A row
// cannot be written without one, so a new flag cannot be accepted and silently dropped; a
// flag accepted only for compatibility says so with `Ignored`.  The apply functions and
// the value parsers they share are in cli_apply.cc (cli_apply.h).

namespace gculaunch {

using namespace cli_flags;  // NOLINT(google-build-using-namespace): the table's functions

namespace {

enum class Kind { kValue, kBool, kRepeat };

// ---- the flag table ----

/// Checks one flag's value and sets the flag's field of CliOptions.
using ApplyFn = Status (*)(const ApplyContext&, CliOptions&);

struct FlagDef {
  // Every field is required: an entry without an apply function does not compile.
  constexpr FlagDef(const char* name_in, const char* aliases_in, Kind kind_in, const char* value_in,
                    const char* group_in, const char* help_in, ApplyFn apply_in,
                    const char* torchrun_in)
      : name(name_in),
        aliases(aliases_in),
        kind(kind_in),
        value(value_in),
        group(group_in),
        help(help_in),
        apply(apply_in),
        torchrun(torchrun_in) {}

  const char* name;     ///< canonical long name, without "--"
  const char* aliases;  ///< further CLI11 names, comma-separated ("" for none)
  Kind kind;
  const char* value;  ///< value shape for help and messages
  const char* group;
  const char* help;
  ApplyFn apply;  ///< kBool: gets ApplyContext::on; the others the value text
  /// The torchrun flag this row implements, dashed ("nproc-per-node", "shutdown-timeout"),
  /// or kGculaunchOnly.  Only torchrun's flags may be abbreviated (ResolvePrefixes).
  const char* torchrun;
};

constexpr const char* kGculaunchOnly = "";

// Every flag, in help order.  The '_' spelling of each name is added
// automatically; `aliases` holds other names (short forms, torchrun's
// alternatives).  PET_<NAME> uses `name`.
constexpr FlagDef kFlags[] = {
    // topology
    {"nproc-per-node", "", Kind::kValue, "N|auto|gpu|cpu", "Topology",
     "ranks on this node: a number, auto (cards in the pool; CPUs for --device cpu), gpu (cards "
     "in the pool) or cpu (CPUs); default 1",
     &ApplyNprocPerNode, "nproc-per-node"},
    {"nnodes", "", Kind::kValue, "N", "Topology",
     "number of nodes: N, or MIN:MAX for an elastic job; default 1", &ApplyNnodes, "nnodes"},
    {"node-rank", "", Kind::kValue, "N", "Topology", "this node's rank, 0..nnodes-1; default 0",
     &ApplyNodeRank, "node-rank"},
    {"master-addr", "", Kind::kValue, "HOST", "Topology",
     "address of the rendezvous store (MASTER_ADDR); default 127.0.0.1", &ApplyMasterAddr,
     "master-addr"},
    {"master-port", "", Kind::kValue, "PORT", "Topology",
     "port of the rendezvous store (MASTER_PORT); default 29500, or chosen at launch with "
     "--standalone",
     &ApplyPort<&CliOptions::master_port>, "master-port"},
    {"rdzv-endpoint", "", Kind::kValue, "HOST:PORT", "Topology",
     "the store as HOST:PORT or [IPv6]:PORT (instead of --master-addr/--master-port; PORT "
     "defaults to 29400); with --rdzv-backend etcd: etcd's endpoints, HOST:2379[,HOST:2379...]",
     &ApplyRdzvEndpoint, "rdzv-endpoint"},
    {"rdzv-backend", "", Kind::kValue, "static|c10d|etcd", "Topology",
     "static and c10d (torchrun's names) both mean gculaunch's own store; etcd (or etcd-v2; "
     "gculaunch speaks etcd's v3 API) keeps the rendezvous in etcd",
     &ApplyRdzvBackend, "rdzv-backend"},
    {"rdzv-id", "", Kind::kValue, "ID", "Topology",
     "run id (TORCHELASTIC_RUN_ID); same as --run-id; with --rdzv-backend etcd it names the "
     "job's keys, <etcd_prefix>/ID/, and is required",
     &ApplyRunId<&CliOptions::rdzv_id>, "rdzv-id"},
    {"run-id", "", Kind::kValue, "ID", "Topology",
     "run id (TORCHELASTIC_RUN_ID); default: generated with --standalone, else \"none\"",
     &ApplyRunId<&CliOptions::run_id>, kGculaunchOnly},
    {"rdzv-conf", "", Kind::kValue, "K=V,...", "Topology",
     "rendezvous settings, kept for multi-node: timeout, join_timeout, last_call_timeout, "
     "close_timeout, read_timeout (seconds), is_host (true/false); etcd: protocol, cacert, "
     "cert, key, etcd_prefix, user, password, password_file, lease_ttl (docs/etcd.md)",
     &ApplyRdzvConf, "rdzv-conf"},
    {"rdzv-timeout", "", Kind::kValue, "SECONDS", "Topology",
     "multi-node: how long nodes wait for the master node and for each other; default 900",
     &ApplyRdzvTimeout, kGculaunchOnly},
    {"node-timeout", "", Kind::kValue, "SECONDS", "Topology",
     "multi-node: a node that stays silent while its connection stays up (stopped, starved, "
     "wedged) is lost after half of SECONDS to SECONDS, the more the longer the pauses the "
     "job has seen (node 0 after SECONDS); a closed connection is lost at once, a vanished "
     "host within about 5 s; on etcd half of it is the default lease_ttl; default 30",
     &ApplyNodeTimeout, kGculaunchOnly},
    {"standalone", "", Kind::kBool, "", "Topology",
     "single node: store on 127.0.0.1, port chosen at launch (or --master-port)",
     &ApplySwitch<&CliOptions::standalone>, "standalone"},
    {"platform-world-size", "", Kind::kValue, "nodes|procs", "Topology",
     "how to read a job platform's WORLD_SIZE: nodes (default: Volcano, KubeBrain, older "
     "Kubeflow) or procs (nodes x nproc; needs --nproc-per-node N)",
     &ApplyPlatformWorldSize, kGculaunchOnly},
    {"max-restarts", "", Kind::kValue, "N", "Topology",
     "restart all ranks up to N times after a failure (at most 1000000); default 0",
     &ApplyMaxRestarts, "max-restarts"},
    {"restart-backoff", "", Kind::kValue, "INITIAL:MAX|off", "Topology",
     "a crash loop backs off: after attempts that each ran under 10 s, restarts wait INITIAL "
     "seconds, doubling up to MAX (the first restart never waits; an attempt of 60 s resets "
     "it); off (or 0): restart at once; default 1:60",
     &ApplyRestartBackoff, kGculaunchOnly},
    {"max-same-failures", "", Kind::kValue, "N", "Topology",
     "stop restarting on the N-th attempt in a row that fails within 10 s as the one before "
     "(same exit code or signal, same last line of its error or traceback), or, with "
     "--progress-file, after N failed attempts in a row without progress; 0: off; default 3",
     &ApplyMaxSameFailures, kGculaunchOnly},
    {"progress-file", "", Kind::kValue, "PATH", "Topology",
     "a file the script rewrites with its step or checkpoint number; read after each failed "
     "attempt: when it stops rising, the restarts stop (see --max-same-failures)",
     &ApplyText<&CliOptions::progress_file>, kGculaunchOnly},
    {"monitor-interval", "", Kind::kValue, "SECONDS", "Topology",
     "accepted for torchrun compatibility and ignored: gculaunch notices exits at once",
     &ApplySeconds<&CliOptions::monitor_interval>, "monitor-interval"},
    {"role", "", Kind::kValue, "NAME", "Topology", "ROLE_NAME of the ranks; default \"default\"",
     &ApplyRole, "role"},
    {"start-method", "", Kind::kValue, "spawn|fork|forkserver", "Topology",
     "accepted for torchrun compatibility and ignored: every rank is a new process (fork and "
     "exec)",
     &ApplyStartMethod, "start-method"},
    {"local-addr", "", Kind::kValue, "HOST", "Topology",
     "multi-node: the address this node publishes to the others; default the interface that "
     "routes to the master",
     &ApplyLocalAddr, "local-addr"},
    // program
    {"module", "-m", Kind::kBool, "", "Program",
     "SCRIPT is a Python module: run python -u -m SCRIPT ARGS", &ApplySwitch<&CliOptions::module>,
     "module"},
    {"no-python", "", Kind::kBool, "", "Program", "SCRIPT is a program: run SCRIPT ARGS directly",
     &ApplySwitch<&CliOptions::no_python>, "no-python"},
    {"run-path", "", Kind::kBool, "", "Program",
     "accepted for torchrun compatibility: SCRIPT runs as python -u SCRIPT in each rank, as "
     "without it (the interpreter is --python or PYTHON_EXEC)",
     &ApplySwitch<&CliOptions::run_path>, "run-path"},
    {"python", "", Kind::kValue, "PATH", "Program",
     "the interpreter; default $PYTHON_EXEC, else python3 on PATH", &ApplyText<&CliOptions::python>,
     kGculaunchOnly},
    {"use-env", "", Kind::kBool, "", "Program", "accepted: LOCAL_RANK is always in the environment",
     &ApplySwitch<&CliOptions::use_env>, kGculaunchOnly},
    {"local-rank-arg", "", Kind::kBool, "", "Program",
     "also pass --local_rank=N after SCRIPT (legacy torch.distributed.launch scripts)",
     &ApplySwitch<&CliOptions::local_rank_arg>, kGculaunchOnly},
    {"python-shim", "", Kind::kBool, "", "Program",
     "load gculaunch's sitecustomize in each rank: init_process_group with the device's "
     "backend before your code, torch.cuda.set_device & co. redirected to the vendor module "
     "on non-CUDA devices, gloo if the backend is missing (for MMEngine and other CUDA-minded "
     "code)",
     &ApplySwitch<&CliOptions::python_shim>, kGculaunchOnly},
    {"no-backend-fallback", "", Kind::kBool, "", "Program",
     "with --python-shim: a missing backend stops the rank instead of falling back to gloo",
     &ApplySwitch<&CliOptions::no_backend_fallback>, kGculaunchOnly},
    {"stack-dumps", "", Kind::kBool, "", "Program",
     "load gculaunch's stack-dump hook in each rank, so that `gculaunch stacks` can show every "
     "thread's Python stack of a running rank without stopping it (on with --hang-timeout)",
     &ApplySwitch<&CliOptions::stack_dumps>, kGculaunchOnly},
    {"warm-ranks", "", Kind::kBool, "", "Program",
     "keep a standby per rank that has imported --preload while the attempt runs: a restart "
     "hands it the new attempt's environment instead of starting a new interpreter (Python "
     "ranks; costs one idle interpreter per rank)",
     &ApplySwitch<&CliOptions::warm_ranks>, kGculaunchOnly},
    {"preload", "", Kind::kValue, "MODULE,...", "Program",
     "with --warm-ranks: the modules a standby imports before it waits (default "
     "torch,torch.distributed)",
     &ApplyPreload, kGculaunchOnly},
    {"no-python-faulthandler", "", Kind::kBool, "", "Program",
     "do not give ranks PYTHONFAULTHANDLER=1 (by default a rank that dies of SIGSEGV, SIGABRT, "
     "SIGBUS, SIGFPE or SIGILL prints its Python stack)",
     &ApplySwitch<&CliOptions::no_python_faulthandler>, kGculaunchOnly},
    {"job", "", Kind::kValue, "FILE.yaml", "Program",
     "a job file: script, args, flags, env and a training config per card count; flags and "
     "PET_* variables override it; SCRIPT may then be left out",
     &ApplyText<&CliOptions::job>, kGculaunchOnly},
    // devices
    {"device", "", Kind::kValue, "NAME|auto|PATH.yaml", "Devices",
     "device profile: gcu, cuda, cpu, ascend, mlu, rocm, auto (first whose cards exist, else "
     "cpu), or a profile YAML file; default auto",
     &ApplyText<&CliOptions::device>, kGculaunchOnly},
    {"bind", "", Kind::kValue, "all|rank", "Devices",
     "all: every rank sees the whole card pool (as torchrun); rank: each rank sees only its "
     "card; default all",
     &ApplyBind, kGculaunchOnly},
    {"cpu-affinity", "", Kind::kValue, "none|numa|spread", "Devices",
     "pin each rank to CPUs: numa: its card's NUMA node, split fairly among the ranks there; "
     "spread: all CPUs split fairly; also sets OMP_NUM_THREADS to the rank's share unless you "
     "set it; default none",
     &ApplyCpuAffinity, kGculaunchOnly},
    {"numa-binding", "", Kind::kValue, "node|socket|exclusive|core-complex", "Devices",
     "torchrun's NUMA binding, done as --cpu-affinity numa (each rank pinned to CPUs of its "
     "card's NUMA node)",
     &ApplyNumaBinding, "numa-binding"},
    {"virtual-local-rank", "", Kind::kBool, "", "Devices",
     "torchrun's virtual local rank (2.10+): every rank gets LOCAL_RANK=0 and sees only its "
     "own card (--bind rank), as device index 0",
     &ApplySwitch<&CliOptions::virtual_local_rank>, "virtual-local-rank"},
    {"env", "", Kind::kRepeat, "KEY=VALUE", "Devices",
     "set a variable for every rank (repeatable; overrides your environment and the profile)",
     &ApplyEnv, kGculaunchOnly},
    {"sysroot", "", Kind::kValue, "DIR", "Devices",
     "look for /dev and /sys below DIR (for tests and preflight checks)",
     &ApplyText<&CliOptions::sysroot>, kGculaunchOnly},
    // supervision and output
    {"grace-period", "shutdown-timeout", Kind::kValue, "SECONDS", "Supervision",
     "time between SIGTERM and SIGKILL when stopping ranks; default 25",
     &ApplySeconds<&CliOptions::grace_period>, "shutdown-timeout"},
    {"no-agent-store", "", Kind::kBool, "", "Supervision",
     "rank 0 hosts the store (TORCHELASTIC_USE_AGENT_STORE=False) instead of gculaunch",
     &ApplySwitch<&CliOptions::no_agent_store>, kGculaunchOnly},
    {"worker-port", "", Kind::kValue, "PORT", "Supervision",
     "with --no-agent-store: the port rank 0 binds (MASTER_PORT)",
     &ApplyPort<&CliOptions::worker_port>, kGculaunchOnly},
    {"log-dir", "", Kind::kValue, "DIR", "Supervision",
     "write per-rank logs and error files below DIR/<run id>_<random>",
     &ApplyText<&CliOptions::log_dir>, "log-dir"},
    {"allow-shared-log-dir", "", Kind::kBool, "", "Supervision",
     "accept a --log-dir that another user could change (writable by others without the "
     "sticky bit, or owned by another user), with a warning; gculaunch then writes only its "
     "own log files there",
     &ApplySwitch<&CliOptions::allow_shared_log_dir>, kGculaunchOnly},
    {"redirects", "-r", Kind::kValue, "0-3|I:V,...", "Supervision",
     "send streams to the log files only: 1 stdout, 2 stderr, 3 both (per local rank: 0:3,1:2)",
     &ApplyStreams<&CliOptions::redirects>, "redirects"},
    {"tee", "-t", Kind::kValue, "0-3|I:V,...", "Supervision",
     "copy streams to the log files too: 1 stdout, 2 stderr, 3 both (per local rank: 0:3,1:2)",
     &ApplyStreams<&CliOptions::tee>, "tee"},
    {"local-ranks-filter", "", Kind::kValue, "I,J,...", "Supervision",
     "show only these local ranks' output on the console", &ApplyLocalRanksFilter,
     "local-ranks-filter"},
    {"duplicate-stdout-filters", "", Kind::kValue, "TEXT,...", "Supervision",
     "also copy the teed stdout lines (--tee) of the console's ranks (--local-ranks-filter) "
     "that contain one of these texts to filtered_stdout.log in each attempt's log directory "
     "(',,' is a literal comma)",
     &ApplyFilters<&CliOptions::duplicate_stdout_filters>, "duplicate-stdout-filters"},
    {"duplicate-stderr-filters", "", Kind::kValue, "TEXT,...", "Supervision",
     "the same for stderr lines, to filtered_stderr.log",
     &ApplyFilters<&CliOptions::duplicate_stderr_filters>, "duplicate-stderr-filters"},
    {"log-line-prefix-template", "", Kind::kValue, "TEMPLATE", "Supervision",
     "what each console line starts with, torch's template: ${role_name}, ${rank} and "
     "${local_rank} are replaced (e.g. '[${role_name}-r${rank}]:'); default "
     "$TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE, else '[rankN]: '",
     &ApplyText<&CliOptions::log_line_prefix_template>, kGculaunchOnly},
    {"stdin", "", Kind::kValue, "null|rank0", "Supervision",
     "null: ranks read /dev/null; rank0: rank 0 gets gculaunch's stdin (for breakpoint())",
     &ApplyStdin, kGculaunchOnly},
    {"summary-json", "", Kind::kValue, "PATH", "Supervision",
     "write the outcome of the run (exit codes, root cause) as JSON",
     &ApplyText<&CliOptions::summary_json>, kGculaunchOnly},
    {"exit-codes", "", Kind::kValue, "rank|classes", "Supervision",
     "what the exit status says: rank (default, as torchrun) passes the failing rank's code "
     "through; classes exits 0 success, 80 retry, 81 preempted, 82 reschedule or 83 fatal "
     "(README, Exit codes); also GCULAUNCH_EXIT_CODES",
     &ApplyExitCodes, kGculaunchOnly},
    {"termination-log", "", Kind::kValue, "PATH|none", "Supervision",
     "at exit write why (at most 4096 bytes, most important first) to this existing file, "
     "never through a symbolic link; default /dev/termination-log when it is a writable "
     "regular file (Kubernetes), none: off",
     &ApplyText<&CliOptions::termination_log>, kGculaunchOnly},
    {"exit-barrier-timeout", "", Kind::kValue, "SECONDS", "Supervision",
     "several nodes: how long node 0 keeps the store up at exit for the other nodes to say "
     "bye (default: the grace period + 35 s); one node has no such wait; also "
     "TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT",
     &ApplySeconds<&CliOptions::exit_barrier_timeout>, kGculaunchOnly},
    {"progress-interval", "", Kind::kValue, "SECONDS", "Supervision",
     "when the console is not a terminal, show a rank's carriage-return (progress bar) updates "
     "at most this often, plus its final state; 0: every update; default 30",
     &ApplySeconds<&CliOptions::progress_interval>, kGculaunchOnly},
    {"hang-timeout", "", Kind::kValue, "DURATION", "Supervision",
     "a hang is DURATION without progress (any rank's output, or a touch of its "
     "GCULAUNCH_HEARTBEAT_FILE): every rank's stacks are shown, then --on-hang; off by default; "
     "turns on --stack-dumps",
     &ApplyDuration<&CliOptions::hang_timeout>, kGculaunchOnly},
    {"hang-grace", "", Kind::kValue, "DURATION", "Supervision",
     "with --hang-timeout: how long an attempt may go without any progress at start-up "
     "(import torch, data loading); default 600s",
     &ApplyDuration<&CliOptions::hang_grace>, kGculaunchOnly},
    {"on-hang", "", Kind::kValue, "stop|restart|report", "Supervision",
     "with --hang-timeout: stop (exit 6; default), restart (counts against --max-restarts) or "
     "report and keep running",
     &ApplyOnHang, kGculaunchOnly},
    {"health-check", "", Kind::kValue, "CMD", "Supervision",
     "an executable run before every attempt next to the device profile's own checks: exit 0 "
     "is healthy, anything else makes this node step aside (exit 5); it gets "
     "GCULAUNCH_HEALTH_CARDS and GCULAUNCH_HEALTH_ATTEMPT",
     &ApplyText<&CliOptions::health_check>, kGculaunchOnly},
    {"health-check-timeout", "", Kind::kValue, "DURATION", "Supervision",
     "with --health-check: a check still running after DURATION is killed and counts as "
     "unhealthy; default 30s",
     &ApplyDuration<&CliOptions::health_check_timeout>, kGculaunchOnly},
    {"device-memory-wait", "", Kind::kValue, "SECONDS", "Supervision",
     "before a restart, wait at most SECONDS until the cards' memory of the torn-down attempt "
     "is freed, where the device profile says how to read it (health.memory); then warn and "
     "go on; 0: do not wait; default 10",
     &ApplySeconds<&CliOptions::device_memory_wait>, kGculaunchOnly},
    {"signals-to-handle", "", Kind::kValue, "SIG,...", "Supervision",
     "signals that stop the ranks: SIGINT, SIGTERM, SIGHUP, SIGQUIT always do; a listed "
     "SIGUSR1, SIGUSR2 or SIGALRM does too (unlisted USR1/USR2 are forwarded)",
     &ApplySignalsToHandle, "signals-to-handle"},
    {"event-log-handler", "", Kind::kValue, "NAME", "Supervision",
     "accepted for torchrun compatibility and ignored: gculaunch logs to stderr and "
     "--summary-json",
     &ApplyText<&CliOptions::event_log_handler>, "event-log-handler"},
    {"logs-specs", "", Kind::kValue, "default", "Supervision",
     "torchrun's logs-spec plugin: only default (--log-dir, --redirects, --tee) is supported",
     &ApplyLogsSpecs, "logs-specs"},
    // metrics (docs/operations.md)
    {"metrics-port", "", Kind::kValue, "PORT", "Supervision",
     "serve Prometheus metrics over HTTP at http://ADDR:PORT/metrics (0: a free port, "
     "logged); default off",
     &ApplyPort<&CliOptions::metrics_port>, kGculaunchOnly},
    {"metrics-addr", "", Kind::kValue, "ADDR", "Supervision",
     "the address --metrics-port listens on; default 127.0.0.1 (0.0.0.0 or :: for every "
     "interface)",
     &ApplyText<&CliOptions::metrics_addr>, kGculaunchOnly},
    // the store's memory bounds (docs/tcpstore-protocol.md section 6.1)
    {"store-max-queued", "", Kind::kValue, "SIZE", "Supervision",
     "most bytes waiting to be sent to one store connection; more closes it (which fails a "
     "rank); default 256M",
     &ApplySize<&CliOptions::store_max_queued>, kGculaunchOnly},
    {"store-max-buffered", "", Kind::kValue, "SIZE", "Supervision",
     "most bytes all store connections together hold in partial requests and unsent "
     "replies; past it the ones holding the most are closed; default 256M",
     &ApplySize<&CliOptions::store_max_buffered>, kGculaunchOnly},
    // who may steer the job (docs/security.md)
    {"job-secret-file", "", Kind::kValue, "FILE", "Supervision",
     "a file holding the job's secret (every node the same; e.g. a mounted Kubernetes Secret): "
     "node agents prove it to node 0, whose store then lets no other client change gculaunch's "
     "own keys; default $GCULAUNCH_JOB_SECRET_FILE, else none",
     &ApplyText<&CliOptions::job_secret_file>, kGculaunchOnly},
    {"store-allow", "", Kind::kValue, "CIDR,...", "Supervision",
     "the store accepts connections only from these networks (and loopback), e.g. "
     "10.0.0.0/8,fd00::/64; default anyone",
     &ApplyText<&CliOptions::store_allow>, kGculaunchOnly},
    {"store-proxy", "", Kind::kBool, "", "Supervision",
     "on every node but node 0, serve the node's own ranks' store connections and carry them "
     "to node 0 over one connection (node 0 then holds one per node, not one per rank); the "
     "ranks' MASTER_ADDR/MASTER_PORT name the local proxy; default off",
     &ApplySwitch<&CliOptions::store_proxy>, kGculaunchOnly},
    // what to do
    {"dry-run", "", Kind::kBool, "", "Dry run",
     "print every rank's command line and the variables gculaunch sets; start no rank",
     &ApplySwitch<&CliOptions::dry_run>, kGculaunchOnly},
    {"format", "", Kind::kValue, "table|json|env", "Dry run",
     "--dry-run output: table (default), json, or env (shell export lines)", &ApplyFormat,
     kGculaunchOnly},
};

constexpr bool EveryFlagApplies() {
  for (const FlagDef& def : kFlags) {
    if (def.apply == nullptr) return false;
  }
  return true;
}
static_assert(EveryFlagApplies(), "every entry of kFlags needs an apply function");

// Applies one value-taking flag (from the command line, PET_* or a job file).
Status ApplyValue(const FlagDef& def, const std::string& source, const std::string& value,
                  CliOptions& o) {
  // An empty PET_ variable counts as unset, so this only catches --flag ''.
  if (value.empty()) {
    return Error{source + " '': expected " + std::string(def.value),
                 "give a value or drop " + source};
  }
  return def.apply(ApplyContext{source, value}, o);
}

// Applies one item of a repeatable flag.
Status ApplyItem(const FlagDef& def, const std::string& source, const std::string& item,
                 CliOptions& o) {
  return def.apply(ApplyContext{source, item}, o);
}

// Applies a boolean flag's value.
Status ApplySwitchValue(const FlagDef& def, const std::string& source, bool on, CliOptions& o) {
  const std::string none;
  return def.apply(ApplyContext{source, none, on}, o);
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
    return "Usage: gculaunch [OPTIONS] SCRIPT [SCRIPT_ARGS...]\n\n" + app->get_description() + "\n";
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

// Every name a row answers to exactly: "--name", "--na_me", its aliases ("-m", "--x").
std::vector<std::string> ExactNames(const FlagDef& def) {
  std::vector<std::string> names = {"--" + std::string(def.name), "--" + Underscored(def.name)};
  for (const std::string& alias : Split(def.aliases, ',')) {
    if (alias.empty()) continue;
    if (alias[0] == '-') {
      names.push_back(alias);
    } else {
      names.push_back("--" + alias);
      names.push_back("--" + Underscored(alias));
    }
  }
  return names;
}

const FlagDef* ExactFlag(const std::string& flag) {
  for (const FlagDef& def : kFlags) {
    const std::vector<std::string> names = ExactNames(def);
    if (std::find(names.begin(), names.end(), flag) != names.end()) return &def;
  }
  return nullptr;
}

// argparse's abbreviations, as torchrun users write them (--nnode=1, --nproc_per_nod 8):
// `flag` ("--nproc_per_nod") is a prefix of torchrun flags in either spelling.  Only
// torchrun's flags take part, so a new gculaunch flag never makes an old command line
// ambiguous.  Returns the rows it matches (once each).
std::vector<const FlagDef*> PrefixMatches(const std::string& flag) {
  std::vector<const FlagDef*> matches;
  if (flag.size() < 3) return matches;  // "--" alone is the end of the flags
  for (const FlagDef& def : kFlags) {
    const std::string torchrun = def.torchrun;
    if (torchrun.empty()) continue;
    for (const std::string& name : {"--" + torchrun, "--" + Underscored(torchrun)}) {
      if (name.rfind(flag, 0) == 0) {
        matches.push_back(&def);
        break;
      }
    }
  }
  return matches;
}

// Rewrites abbreviated torchrun flags before SCRIPT to their canonical name; an ambiguous
// abbreviation is an error naming the candidates.  Stops at SCRIPT, "--" or a flag it does
// not know (the parser reports that one).
Result<std::vector<std::string>> ResolvePrefixes(std::vector<std::string> args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--" || arg.size() < 2 || arg[0] != '-') break;
    const size_t eq = arg.find('=');
    const std::string flag = arg.substr(0, eq);
    const bool has_value = eq != std::string::npos;
    if (flag == "--help" || flag == "-h" || flag == "--version") continue;
    const bool is_long = flag.rfind("--", 0) == 0;
    // A short form may carry its value attached ("-r3").
    const bool short_attached = !is_long && flag.size() > 2;
    const FlagDef* def = ExactFlag(short_attached ? flag.substr(0, 2) : flag);
    if (def == nullptr && is_long) {
      const std::vector<const FlagDef*> matches = PrefixMatches(flag);
      if (matches.size() > 1) {
        std::string candidates;
        for (const FlagDef* match : matches) {
          candidates += (candidates.empty() ? "--" : ", --") + std::string(match->torchrun);
        }
        return Error{"ambiguous flag '" + flag + "': it could be " + candidates,
                     "write the whole flag name"};
      }
      if (matches.size() == 1) {
        def = matches.front();
        args[i] = "--" + std::string(def->name) + (has_value ? arg.substr(eq) : "");
      }
    }
    if (def == nullptr) break;
    if (def->kind != Kind::kBool && !has_value && !short_attached) ++i;  // skip the value
  }
  return args;
}

// torchrun's argparse (a positional SCRIPT, then nargs=REMAINDER) drops the first "--" of the
// argument list when it stands right before SCRIPT or right after it, and keeps every other
// "--" for the script: "-- x.py -- a" gives x.py ['--', 'a'], "x.py -- --depth=24" gives
// ['--depth=24'], "x.py a -- b" gives ['a', '--', 'b'].  (The first "--" turns every later
// word into a positional, so SCRIPT's pattern, one word with the "--" around it, can take only
// that one.)  `rest` starts where the options end: at SCRIPT or at the first "--".  Returns
// true when the dropped "--" stood before SCRIPT, which may then look like a flag.
bool DropFirstDashes(std::vector<std::string>& rest) {
  if (rest.empty()) return false;
  if (rest.front() == "--") {
    rest.erase(rest.begin());
    return true;
  }
  if (rest.size() > 1 && rest[1] == "--") rest.erase(rest.begin() + 1);
  return false;
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

bool CliOptions::FromCommandLineForTest(std::string_view name) const {
  auto it = given.find(std::string(name));
  return it != given.end() && it->second.rfind("--", 0) == 0;
}

namespace {

// Applies a flag given on the command line, from what CLI11 collected for it: `value`
// (kValue), `items` (kRepeat) or `on` (kBool).
Status ApplyCommandLine(const FlagDef& def, const std::string& source, const std::string& value,
                        const std::vector<std::string>& items, bool on, CliOptions& o) {
  switch (def.kind) {
    case Kind::kBool:
      return ApplySwitchValue(def, source, on, o);
    case Kind::kValue:
      return ApplyValue(def, source, value, o);
    case Kind::kRepeat:
      for (const std::string& item : items) {
        if (Status applied = ApplyItem(def, source, item, o); !applied.ok()) return applied;
      }
      return OkStatus();
  }
  return OkStatus();
}

// Applies a flag from its PET_<NAME> variable `pet` (not empty): an integer or true/false for
// a boolean flag, one item per line for a repeatable one (empty lines skipped).
Status ApplyPet(const FlagDef& def, const std::string& pet, const std::string& text,
                CliOptions& o) {
  switch (def.kind) {
    case Kind::kBool: {
      auto on = ParseBoolText(text);
      if (!on) {
        return Error{pet + " '" + text + "': expected 1 or 0 (or true/false)",
                     "e.g. " + pet + "=1"};
      }
      return ApplySwitchValue(def, pet, *on, o);
    }
    case Kind::kValue:
      return ApplyValue(def, pet, text, o);
    case Kind::kRepeat:
      for (const std::string& item : Split(text, '\n')) {
        if (item.empty()) continue;
        if (Status applied = ApplyItem(def, pet, item, o); !applied.ok()) return applied;
      }
      return OkStatus();
  }
  return OkStatus();
}

Result<CliResult> Parse(const std::vector<std::string>& args, const EnvMap& env,
                        const CliParseMode& mode) {
  CLI::App app(kDescription, "gculaunch");
  bool version = false;
  std::map<std::string, std::string> values;
  std::map<std::string, std::vector<std::string>> lists;
  std::map<std::string, bool> flags;
  std::map<std::string, CLI::Option*> options;

  CliResult result;
  auto resolved = ResolvePrefixes(args);
  if (!resolved.ok()) return resolved.error();
  std::vector<std::string> reversed(resolved->rbegin(), resolved->rend());
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
  const bool after_dashes = DropFirstDashes(rest);
  // With a job file the script may come from the file (MakeLaunchSpec merges it).
  const bool has_job = options["job"]->count() > 0 || !env.GetOr(PetName("job"), "").empty();
  if (rest.empty() && !mode.script_optional && !has_job) {
    return Error{"no SCRIPT given",
                 "gculaunch [OPTIONS] SCRIPT [SCRIPT_ARGS...]; see gculaunch --help"};
  }
  if (!rest.empty()) {
    // After "--" a word that looks like a flag is SCRIPT (argparse takes it so).
    if (!after_dashes && rest.front().size() > 1 && rest.front()[0] == '-') {
      return UnknownFlag(rest.front());
    }
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
    const Status applied = on_command_line ? ApplyCommandLine(def, source, values[def.name],
                                                              lists[def.name], flags[def.name], o)
                                           : ApplyPet(def, pet, pet_value, o);
    if (!applied.ok()) return applied.error();
  }
  return result;
}

}  // namespace

bool IsRdzvConfKey(const std::string& key) { return IsRdzvKey(key); }

namespace {

// The value of `flag` ("exit-codes") in `args` before SCRIPT's "--": "--flag V", "--flag=V",
// in either spelling; the last one wins, as on a parsed command line.
std::optional<std::string> ScanFlag(const std::vector<std::string>& args, std::string_view flag) {
  std::string underscored(flag);
  std::replace(underscored.begin(), underscored.end(), '-', '_');
  std::optional<std::string> found;
  for (size_t i = 0; i < args.size() && args[i] != "--"; ++i) {
    for (const std::string& name : {"--" + std::string(flag), "--" + underscored}) {
      if (args[i] == name && i + 1 < args.size()) found = args[i + 1];
      if (args[i].starts_with(name + "=")) found = args[i].substr(name.size() + 1);
    }
  }
  return found;
}

}  // namespace

ExitSettings ScanExitSettings(const std::vector<std::string>& args, const EnvMap& env) {
  ExitSettings settings;
  std::optional<std::string> scheme = ScanFlag(args, "exit-codes");
  for (const char* var : {"PET_EXIT_CODES", "GCULAUNCH_EXIT_CODES"}) {
    if (!scheme && !env.GetOr(var, "").empty()) scheme = env.GetOr(var, "");
  }
  if (scheme) settings.scheme = ExitSchemeNamed(*scheme).value_or(ExitScheme::kRank);
  settings.termination_log = ScanFlag(args, "termination-log");
  if (!settings.termination_log && !env.GetOr(PetName("termination-log"), "").empty()) {
    settings.termination_log = env.GetOr(PetName("termination-log"), "");
  }
  return settings;
}

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

std::vector<std::string> IgnoredFlagNames() {
  std::vector<std::string> names;
  for (const FlagDef& def : kFlags) {
    if (def.apply == &Ignored) names.emplace_back(def.name);
  }
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
      applied = ApplySwitchValue(*def, source, *on, options);
      break;
    }
    case Kind::kValue:
      applied = ApplyValue(*def, source, value, options);
      break;
    case Kind::kRepeat:
      applied = ApplyItem(*def, source, value, options);
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
