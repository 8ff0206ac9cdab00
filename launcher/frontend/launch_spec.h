// LaunchSpec: everything needed to start this node's ranks, decided up front.
//
// MakeLaunchSpec() turns the parsed command line, the environment and the
// device probe into a LaunchSpec and does all cross-field validation; after
// it succeeds, nothing about the job is ambiguous any more.  The dry run
// prints a LaunchSpec and the real launch executes it: both call the same
// pure BuildRankEnv()/BuildRankArgv() (rank_env.h), which is what makes the
// dry run trustworthy.
//
// Values that only exist once a launch happens (a port picked at launch, a
// generated run id, the error-file directory) are not in the spec; they come
// in a RankRuntime (rank_env.h).
//
// Precedence of every setting, highest first: the command line, its PET_*
// environment variable (cli.h), a --job file (job_file.h; merged first, so
// its values count as given for the platform layer), a PlatformInfo (the job
// platform's variables, read by ReadPlatform in platform.h), gculaunch's default.
//
// Ownership: MakeLaunchSpec borrows its inputs for the call only.  Thread
// safety: plain values; FileAccess and DeviceProbe are used from one thread.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/cidr.h"
#include "base/env_map.h"
#include "base/error.h"
#include "base/outcome.h"
#include "launcher/frontend/cpu_affinity.h"
#include "launcher/frontend/device_profile.h"
#include "launcher/frontend/file_access.h"
#include "launcher/frontend/platform.h"
#include "launcher/frontend/ranks_torch.h"
#include "launcher/frontend/rdzv_backend.h"
#include "launcher/frontend/types.h"

namespace gculaunch {

struct CliOptions;  // cli.h

struct LaunchSpec {
  // ---- topology (torchrun's meanings) ----
  int nnodes = 1;  ///< elastic: MAX
  /// Elastic (--nnodes MIN:MAX, MIN < MAX): MIN.  A fixed-size c10d job without a node rank
  /// (--rdzv-backend c10d, no --node-rank, no platform RANK): MIN = MAX = nnodes.  0: a node
  /// rank is given (or the default 0).  With MIN > 0, node ranks, WORLD_SIZE and the rank
  /// offset are assigned per epoch by the job (docs/multinode.md); node_rank only says
  /// whether this node hosts the store (0) or not (1).
  int min_nodes = 0;
  bool elastic() const { return min_nodes > 0 && min_nodes < nnodes; }
  bool node_rank_at_rendezvous() const { return min_nodes > 0; }
  /// Node rank at rendezvous: whether this node hosts the store, when the command line or
  /// the platform says (--rdzv-conf is_host, --node-rank / RANK 0); unknown: the node whose
  /// address the endpoint names (decided at launch, see store_host_inferred).
  std::optional<bool> store_host;
  /// Why store_host is what it is, for the layout and "waiting" lines: "--rdzv-conf
  /// is_host=true", "198.18.0.1 is an address of interface eth0", ...; empty: unknown.
  std::string store_host_why;
  /// store_host was inferred from the endpoint's host (not given): a second launcher of the
  /// job on the endpoint's host joins as a client when the port is taken, as torchrun does.
  bool store_host_inferred = false;
  /// Inferred, and the store's port was taken on the endpoint's own host, so this node joins
  /// that listener as a client: the listener must then be the job's user's or root's
  /// (checked on each connection to it, launcher/cluster/agent_link.h).
  bool store_listener_here = false;
  /// Elastic: --rdzv-conf last_call_timeout (seconds, torchrun's default 30).
  double last_call_s = 30;
  int node_rank = 0;       ///< GROUP_RANK
  int nproc_per_node = 1;  ///< LOCAL_WORLD_SIZE
  int rank_offset = 0;     ///< RANK of this node's local rank 0 (node_rank * nproc_per_node)
  int world_size = 1;      ///< WORLD_SIZE (all nodes: nnodes * nproc_per_node)
  std::string master_addr = "127.0.0.1";
  /// The port the ranks get as MASTER_PORT.  0: chosen at launch (kAgent:
  /// gculaunch binds port 0 and keeps the socket; kRank0: a free port is
  /// probed just before spawning, as torch 1.13 --standalone does).
  int master_port = 0;
  bool standalone = false;
  std::string role = "default";
  /// TORCHELASTIC_RUN_ID.  Empty: generated at launch (--standalone without
  /// --run-id).  Without --standalone and --run-id it is torchrun's static
  /// default, the literal "none".
  std::string run_id;
  int max_restarts = 0;
  /// --restart-backoff: the wait before a restart after quick failures (initial_s 0: off).
  RestartBackoff restart_backoff;
  /// --max-same-failures: the restarts stop on the N-th consecutive quick attempt that fails
  /// as the one before, or (--progress-file) after N failed attempts without progress; 0: off
  /// (launcher/run/failure_streak.h).
  int max_same_failures = 3;
  /// --progress-file: the file the ranks write their step or checkpoint number to; empty:
  /// none.
  std::string progress_file;
  StoreMode store_mode = StoreMode::kAgent;
  /// --worker-port as given (0: not given).  Only with kRank0, and already
  /// folded into master_port; kept so that a later multi-node rendezvous can
  /// tell the agents' port from the ranks' store port.
  int worker_port = 0;
  /// --rdzv-conf, validated (accepted keys in cli.h).  Not used by a
  /// single-node launch; join_timeout (or timeout) is the default of rdzv_timeout_s.
  std::map<std::string, std::string> rdzv_conf;
  /// --rdzv-backend as given ("static" when not given).
  std::string rdzv_backend = "static";
  /// The backend that keeps the job's rendezvous, with its settings (rdzv_backend.h): the
  /// built-in store, or etcd (etcd_settings.h; the ranks' store is then hosted by each
  /// epoch's leader, not by --rdzv-endpoint).  What it can do: CapabilitiesOf(rdzv).
  RdzvBackend rdzv;
  /// Multi-node: the port node 0's gculaunch serves the node agents on (MASTER_PORT as
  /// read).  With the agent store the ranks use it too (master_port == agent_port); with
  /// --no-agent-store the ranks get --worker-port, or a port node 0 picks per restart
  /// (master_port == 0).  0 on a single node.
  int agent_port = 0;
  /// Multi-node: how long a node waits for the master node to answer, and node 0 for every
  /// node to join (--rdzv-timeout, else --rdzv-conf join_timeout/timeout, else 900).
  double rdzv_timeout_s = 900;
  /// Multi-node: how long a node may stay silent while its connection stays up before it is
  /// lost (--node-timeout; the bound adapts between half of it and it: docs/multinode.md,
  /// "Slow is not dead").  On etcd, half of it is the default lease TTL.
  double node_timeout_s = kDefaultNodeTimeout;
  /// Multi-node: the address this node publishes to the others (--local-addr); empty: the
  /// address of the interface that routes to the master.
  std::string local_addr;

  // ---- the ranks' program ----
  /// The command before per-rank substitution, e.g. {"/usr/bin/python3", "-u",
  /// "train.py", "cfg.py"}; `${local_rank}` in argv[1..] is replaced per rank.
  /// With local_rank_arg, "--local_rank=${local_rank}" already sits right after
  /// the script (where torch.distributed.launch put it).
  std::vector<std::string> argv;
  /// The file to execute: argv[0] resolved on PATH (an absolute path, or the
  /// user's own path when it contains '/').  The spawner execs this with argv.
  std::string executable;
  bool local_rank_arg = false;  ///< --local-rank-arg was given (see argv)
  std::string python;           ///< interpreter used; empty with --no-python
  std::string python_origin;    ///< how it was chosen: kPythonOnPath, "--python", "PYTHON_EXEC"
  /// python3 on PATH was a version manager's shim whose interpreter is known (ranks_python.h):
  /// the shim; `python`, `executable` and argv[0] are then the interpreter it runs.  Empty:
  /// none (the ranks run `python` as found).
  std::string interpreter_shim;
  std::string interpreter_shim_how;  ///< how its interpreter was learnt (ranks_python.h)
  /// With interpreter_shim: what the shim's exec would export to the ranks (PATH with the
  /// interpreter's directory first, PYENV_VERSION), set over --env (BuildRankEnv).
  std::vector<std::pair<std::string, std::string>> interpreter_env;
  /// The torch the ranks' interpreter finds, which picks the NCCL error-handling variable
  /// (ranks_torch.h).  MakeLaunchSpec leaves it kNotProbed (both variables); the launcher
  /// fills it in before the dry run and before the first attempt (launcher/sys/torch_probe.h).
  RanksTorch ranks_torch;
  bool python_shim = false;      ///< --python-shim: the ranks load gculaunch's sitecustomize
  bool backend_fallback = true;  ///< false with --no-backend-fallback (python_shim.h)
  /// The ranks get PYTHONFAULTHANDLER=1 unless the user set it (false with
  /// --no-python-faulthandler): a crash in C code still prints the Python stack.
  bool python_faulthandler = true;
  /// --stack-dumps (also on with --hang-timeout): the ranks load gculaunch's stack-dump hook
  /// (stack_hook.h), which dumps every thread's Python stack on `stack_dump_signal`.
  bool stack_dumps = false;
  /// --warm-ranks (launcher/run/standby_pool.h): standbys that imported `preload` wait for
  /// the next attempt.  Off for --no-python, --run-path and non-Python programs (a note).
  bool warm_ranks = false;
  std::vector<std::string> preload;  ///< --preload, default torch,torch.distributed
  int stack_dump_signal = 0;         ///< StackDumpSignal() when stack_dumps; 0 otherwise
  /// --hang-timeout in seconds; 0: no hang detection.  Each rank then gets
  /// GCULAUNCH_HEARTBEAT_FILE (stack_hook.h), and stack_dumps is on.
  double hang_timeout_s = 0;
  double hang_grace_s = 600;  ///< --hang-grace: before an attempt's first progress
  OnHang on_hang = OnHang::kStop;
  /// TORCHELASTIC_ENABLE_FILE_TIMER=1 in gculaunch's environment: gculaunch serves torch's
  /// file-timer watchdog (launcher/ops/file_timer.h) on file_timer_path, which every rank
  /// gets as TORCHELASTIC_TIMER_FILE (FileTimerPath in rank_env.h).
  bool file_timer = false;
  std::string file_timer_path;  ///< TORCHELASTIC_TIMER_FILE as given; empty: chosen at launch

  // ---- devices ----
  DeviceProfile profile;
  std::vector<std::string> device_pool;  ///< card ids the ranks may use, in order
  std::string pool_source;               ///< where the pool came from, for notes/logs
  DeviceBind bind = DeviceBind::kAll;
  /// --virtual-local-rank (torch 2.10+): every rank gets LOCAL_RANK=0; bind is kRank, so each
  /// sees only its own card.
  bool virtual_local_rank = false;
  /// --cpu-affinity and its plan (cpu_affinity.h): per local rank, the CPUs it
  /// may run on and why; both empty with kNone.
  CpuAffinity cpu_affinity = CpuAffinity::kNone;
  std::vector<std::vector<int>> rank_cpus;
  std::vector<std::string> rank_cpus_where;

  // ---- health gate (launcher/frontend/device_health.h) ----
  /// The profile's health tool (profile.health) found on PATH; empty: none, or not installed.
  std::string health_tool_path;
  std::string health_check;            ///< --health-check as found (a path); empty: none
  std::string health_check_name;       ///< --health-check as given
  double health_check_timeout_s = 30;  ///< --health-check-timeout
  /// --device-memory-wait: the bound of the wait for device memory before a restart (where
  /// profile.health.memory says how to read it and the tool was found); 0: no wait.
  double device_memory_wait_s = 10;
  std::string sysroot = "/";  ///< --sysroot: where the gate looks for /dev and /sys

  // ---- environment ----
  std::vector<std::pair<std::string, std::string>> extra_env;  ///< --env, in order (top layer)
  std::string omp_num_threads_default;  ///< set when the user has no OMP_NUM_THREADS; empty: none

  // ---- supervision and output ----
  double grace_period_s = 25.0;  ///< SIGTERM -> SIGKILL, on every stop path
  /// --signals-to-handle: signal numbers that stop the ranks besides SIGINT, SIGTERM, SIGHUP
  /// and SIGQUIT (which always do): SIGUSR1, SIGUSR2 (otherwise forwarded), SIGALRM.
  std::vector<int> extra_stop_signals;
  std::string log_dir;                ///< per-rank log files; empty: none
  bool allow_shared_log_dir = false;  ///< --allow-shared-log-dir: warn instead of refusing
  StdStreams redirects;               ///< --redirects: streams that go to the log files only
  StdStreams tee;                     ///< --tee: streams that go to the log files and the console
  double progress_interval_s = 30.0;  ///< --progress-interval: non-terminal console, \r updates
  std::vector<int> console_local_ranks;  ///< --local-ranks-filter; empty: all ranks
  /// --log-line-prefix-template, else TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE as torch reads it;
  /// empty: the default "[rankN]: " (ConsolePrefix in rank_env.h).
  std::string log_line_prefix_template;
  /// --duplicate-stdout-filters / --duplicate-stderr-filters: a teed stream of a rank shown
  /// on the console copies its lines that contain one of these to the attempt's
  /// filtered_stdout.log / filtered_stderr.log (FilteredLogRel); empty: no such file.
  std::vector<std::string> duplicate_stdout_filters;
  std::vector<std::string> duplicate_stderr_filters;
  StdinMode stdin_mode = StdinMode::kNull;
  std::string summary_json;       ///< --summary-json PATH; empty: none
  std::string error_file_parent;  ///< gculaunch's own TORCHELASTIC_ERROR_FILE; empty: none
  /// --exit-codes (PET_EXIT_CODES, GCULAUNCH_EXIT_CODES): what the exit status says.
  ExitScheme exit_scheme = ExitScheme::kRank;
  /// --termination-log: a path; empty: /dev/termination-log when it is a writable regular
  /// file; "none": off.
  std::string termination_log;
  /// --exit-barrier-timeout (TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT), seconds: how long node 0
  /// waits at exit for the other nodes' bye; empty: the grace period, the kill wait and 30 s.
  std::optional<double> exit_barrier_timeout_s;

  // ---- metrics (docs/operations.md) ----
  std::optional<int> metrics_port;         ///< --metrics-port; empty: no metrics server
  std::string metrics_addr = "127.0.0.1";  ///< --metrics-addr

  // ---- the store's memory bounds (docs/tcpstore-protocol.md section 6.1); empty: default ----
  std::optional<std::size_t> store_max_queued;    ///< --store-max-queued
  std::optional<std::size_t> store_max_buffered;  ///< --store-max-buffered

  // ---- who may steer the job (docs/security.md) ----
  /// --job-secret-file (or GCULAUNCH_JOB_SECRET_FILE); empty: no secret.
  std::string job_secret_file;
  /// Its content without trailing line breaks.  Never printed, logged or given to a rank.
  std::string job_secret;
  /// --store-allow; empty: the store accepts anyone.
  std::vector<Network> store_allow;
  /// --store-proxy: a node that does not host the store serves its own ranks' store
  /// connections and carries them to node 0 over one connection (rendezvous/proxy.h); its
  /// ranks' MASTER_ADDR/MASTER_PORT name that proxy (ProxiesStore, rank_env.h).
  bool store_proxy = false;

  // ---- what to do ----
  bool dry_run = false;  ///< --dry-run: print, start no rank
  DryRunFormat dry_run_format = DryRunFormat::kTable;

  /// Explanations for the dry run and the start-up log ("no cards found,
  /// previewing 8 ranks"); never part of any value.
  std::vector<std::string> notes;
  /// "layout: 2 nodes x 8 ranks, node 1, master node0:29500 (from WORLD_SIZE=2
  /// (nodes), RANK=1, MASTER_ADDR, MASTER_PORT)": the topology and the inputs it
  /// came from (platform.h).  A launch logs it once at start; the dry run shows
  /// it before everything else.
  std::string layout;
  /// The layout line's "(from WORLD_SIZE=2 (nodes), ...)" or "(defaults)": FormatLayout
  /// builds the line again from it when the launch decides the store host.
  std::string layout_sources;
  /// Job-platform variables a guard ignored (a stray WORLD_SIZE, ...): a launch
  /// prints each as a warning; the dry run shows them after the layout line.
  std::vector<std::string> warnings;
};

/// Whether a launch of `spec` is a node of a job of several nodes: more than one node, or a
/// backend whose elected leader every node meets even alone (RdzvCapabilities).  Such a node
/// has a NodeAgent that decides restarts with the job (launcher/cluster/cluster_node.h).
bool RunsAsCluster(const LaunchSpec& spec);

/// "layout: 2 nodes x 8 ranks, node 1, master node0:29500 (from WORLD_SIZE=2 (nodes), RANK=1,
/// MASTER_ADDR, MASTER_PORT)"; "(defaults)" when nothing was given.  An IPv6 master is written
/// [addr]:port.
std::string FormatLayout(const LaunchSpec& spec);

/// LaunchSpec::python_origin when nothing named the interpreter: the only case in which a
/// version manager's shim is looked behind (ranks_python.h).
inline constexpr char kPythonOnPath[] = "python3 on PATH";

/// torch's variable for the console prefix template (torchrun reads it; --log-line-prefix-template
/// wins).
inline constexpr char kLogLinePrefixTemplateEnv[] = "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE";

/// The variable that may name the job secret's file instead of --job-secret-file; like the
/// etcd password's variable, no rank inherits it.
inline constexpr char kJobSecretFileEnv[] = "GCULAUNCH_JOB_SECRET_FILE";

/// Builds and validates the spec.  `env` is gculaunch's own environment (as
/// read by main): it supplies the job platform's variables (ReadPlatform in
/// platform.h), the card pool (the profile's first visible-devices variable),
/// PYTHON_EXEC, PATH, OMP_NUM_THREADS and TORCHELASTIC_ERROR_FILE.
/// Errors are one line naming the flag or variable and the fix; the caller
/// prints Error::Format() and exits with exit_code::kUsage.
Result<LaunchSpec> MakeLaunchSpec(const CliOptions& options, const EnvMap& env,
                                  const DeviceProbe& probe, const FileAccess& files);

/// Same, with the job platform already read (or made up, in tests): `env` is
/// not searched for platform variables.
Result<LaunchSpec> MakeLaunchSpec(const CliOptions& options, const EnvMap& env,
                                  const DeviceProbe& probe, const FileAccess& files,
                                  const PlatformInfo& platform);

/// Where this run's rank logs (and copies of its error files) go, as the dry run
/// states it: "<log_dir>/<run_id>_<random>" (torchrun's layout; the launch makes
/// a new directory, so a second run into the same --log-dir, or another node
/// sharing it, never overwrites this one).  With --redirects or
/// --tee but no --log-dir: "<TMPDIR>/torchelastic_<random>/<run_id>_<random>"
/// (a kept temporary directory, as torchrun makes).  Empty when no log files
/// are written (WantsLogFiles).
std::string RunLogRoot(const LaunchSpec& spec, const std::string& run_id);

/// True when the ranks' output is written to log files: --log-dir, or
/// --redirects/--tee/--duplicate-*-filters (without --log-dir, in a new kept
/// torchelastic_ directory).
bool WantsLogFiles(const LaunchSpec& spec);

/// The streams (StdStreams bits) of the rank with `local_rank` that get a log file
/// (stdout.log, stderr.log): both with --log-dir (gculaunch keeps every rank's whole output in
/// the directory the user asked for); without it, in the kept torchelastic_ directory,
/// torchrun's rule: the streams --redirects or --tee name for that rank, so a rank they map to
/// 0 leaves no copy of its output in TMPDIR.
int LoggedStreams(const LaunchSpec& spec, int local_rank);

/// Which stream a --duplicate-*-filters file collects.
enum class FilteredStream { kStdout, kStderr };

/// The file of --duplicate-stdout-filters or --duplicate-stderr-filters in each attempt's
/// directory: "filtered_stdout.log" or "filtered_stderr.log" (torchrun's names).
std::string FilteredLogName(FilteredStream stream);

/// The filters of `stream` (--duplicate-stdout-filters or --duplicate-stderr-filters).
const std::vector<std::string>& DuplicateFilters(const LaunchSpec& spec, FilteredStream stream);

/// The local ranks whose lines of `stream` are matched against its filters: torchrun's rule,
/// the ranks that tee the stream (--tee) and are shown on the console (--local-ranks-filter).
/// Empty when there are no filters.
std::vector<int> FilteredLocalRanks(const LaunchSpec& spec, FilteredStream stream);

}  // namespace gculaunch
