// ParseCli: `gculaunch [OPTIONS] SCRIPT [SCRIPT_ARGS...]` -> CliOptions.
//
// The CLI11 adapter.  It parses and checks each flag on its own (syntax and
// range: "--nnodes '4:1': MIN is above MAX"); everything that
// involves two flags, the environment or the machine is MakeLaunchSpec's job.
// CliOptions remembers which flags were given and where from, so later
// messages can name "--nnodes" or "PET_NNODES".
//
// torchrun compatibility:
//   * every flag has the spelling with '-' and the one with '_'
//     (--nproc-per-node / --nproc_per_node);
//   * every flag falls back to PET_<NAME> from the EnvMap when it is not on the
//     command line (NAME: the long name upper-cased, '-' -> '_', e.g.
//     PET_NPROC_PER_NODE; aliases share their canonical flag's variable, e.g.
//     --shutdown-timeout -> PET_GRACE_PERIOD).  The command line wins.
//     Boolean flags take PET_STANDALONE=1/0 (any integer, non-zero = on, as
//     torchrun) or true/false.  An empty PET_ variable counts as unset.
//     PET_ENV holds one KEY=VALUE per line.  --help and --version have none.
//   * everything from SCRIPT on goes to the script untouched, even words that
//     look like gculaunch flags; the first "--" of the arguments is dropped when it
//     stands right before SCRIPT or right after it (or after -m MODULE), as torchrun's
//     argparse drops it (DropFirstDashes in cli.cc); any other "--" is the script's.
//   * a flag given twice: the last one wins (as argparse); --env accumulates.
//
// --rdzv-conf accepts these keys (seconds unless noted); they are validated and
// kept for the multi-node rendezvous, a single node does not use them:
//   timeout, join_timeout, last_call_timeout, close_timeout, read_timeout,
//   is_host (true/false/1/0); with --rdzv-backend etcd also the keys of
//   etcd_settings.h (protocol, cacert, cert, key, etcd_prefix, user, password,
//   lease_ttl, ...; MakeLaunchSpec refuses them with another backend).  Any other key is
//   kept and ignored, as torchrun's backends ignore keys they do not know; MakeLaunchSpec
//   warns once, naming the keys (cli_apply.h UnknownRdzvConfKeys).
//
// Thread safety: pure function; no state.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/env_map.h"
#include "base/error.h"
#include "base/outcome.h"
#include "launcher/frontend/types.h"

namespace gculaunch {

// The largest counts a flag takes (docs/command-line.md, "Limits"); a larger value is a
// one-line error naming the limit ("--max-restarts '2147483646': at most 1000000").  Every
// duration is at most kMaxSeconds (base/duration.h).
inline constexpr int kMaxNprocPerNode = 1 << 16;            ///< 65536 ranks on one node
inline constexpr int kMaxLocalRank = kMaxNprocPerNode - 1;  ///< --local-ranks-filter, -r, -t
inline constexpr int kMaxNodes = 1 << 20;                   ///< 1048576 (--nnodes, --node-rank)
inline constexpr int kMaxRestarts = 1000000;                ///< --max-restarts

/// --nproc-per-node N|auto|gpu|cpu.
struct NprocPerNode {
  enum class Kind { kCount, kAuto, kGpu, kCpu };
  Kind kind = Kind::kCount;
  int count = 1;  ///< kCount only
  bool operator==(const NprocPerNode&) const = default;
};

/// --rdzv-endpoint HOST[:PORT] (IPv6 as [ADDR]:PORT; brackets removed in host).
struct Endpoint {
  std::string host;
  std::optional<int> port;
  bool operator==(const Endpoint&) const = default;
};

/// --node-timeout when not given: a node silent over an open connection is lost after 15 to
/// 30 s (docs/multinode.md, "Slow is not dead").  MakeLaunchSpec and the etcd settings (the
/// default lease TTL) read it.
inline constexpr double kDefaultNodeTimeout = 30;

/// The flags as given.  An empty optional (or false) means "not given": the
/// defaults live in MakeLaunchSpec.
struct CliOptions {
  std::optional<NprocPerNode> nproc_per_node;
  std::optional<int> nnodes;     ///< N, or N:N folded to N; MAX of MIN:MAX
  std::optional<int> min_nodes;  ///< MIN of an elastic MIN:MAX (MIN < MAX)
  std::optional<int> node_rank;
  std::optional<std::string> master_addr;  ///< IPv6 brackets removed
  std::optional<int> master_port;
  std::optional<Endpoint> rdzv_endpoint;
  /// --rdzv-endpoint when it is a list or a URL ("h1:2379,h2:2379", "https://h1:2379"), which
  /// only the etcd backend takes (etcd_settings.h checks it); rdzv_endpoint is then empty.
  std::optional<std::string> rdzv_endpoint_list;
  std::optional<std::string> rdzv_backend;  ///< "static", "c10d", "etcd" or "etcd-v2"
  std::optional<std::string> rdzv_id;
  std::optional<std::string> run_id;
  std::map<std::string, std::string> rdzv_conf;
  std::optional<double> rdzv_timeout;  ///< --rdzv-timeout SECONDS (> 0)
  std::optional<double> node_timeout;  ///< --node-timeout SECONDS (>= 2; kDefaultNodeTimeout)
  bool standalone = false;
  std::optional<PlatformWorldSize> platform_world_size;  ///< how to read a platform's WORLD_SIZE
  std::optional<int> max_restarts;
  std::optional<RestartBackoff> restart_backoff;  ///< --restart-backoff INITIAL:MAX|off
  std::optional<int> max_same_failures;           ///< --max-same-failures N (0: off)
  std::optional<std::string> progress_file;       ///< --progress-file PATH
  std::optional<double> monitor_interval;
  std::optional<std::string> role;
  bool module = false;  ///< -m: SCRIPT is a module name
  bool no_python = false;
  std::optional<std::string> python;
  std::optional<std::string> job;  ///< --job FILE: merged by MakeLaunchSpec (job_file.h)
  /// Filled from a job file's `configs:` (job_file.h): total card count (world
  /// size) -> training config, substituted for "{config}" in SCRIPT_ARGS.
  std::map<int, std::string> job_configs;
  std::string job_configs_source;  ///< "job.yaml:12" (the configs: key), for messages
  bool use_env = false;  ///< accepted; gculaunch always passes LOCAL_RANK in the environment
  bool local_rank_arg = false;
  bool python_shim = false;                         ///< --python-shim (python_shim.h)
  bool no_backend_fallback = false;                 ///< --no-backend-fallback
  bool stack_dumps = false;                         ///< --stack-dumps (stack_hook.h)
  bool warm_ranks = false;                          ///< --warm-ranks (launcher/run/standby_pool.h)
  std::optional<std::vector<std::string>> preload;  ///< --preload MODULE,...
  std::optional<std::string> health_check;          ///< --health-check CMD
  std::optional<double> health_check_timeout;       ///< --health-check-timeout SECONDS (> 0)
  std::optional<double> device_memory_wait;         ///< --device-memory-wait SECONDS (>= 0)
  std::optional<double> hang_timeout;               ///< --hang-timeout DURATION, seconds (> 0)
  std::optional<double> hang_grace;                 ///< --hang-grace DURATION, seconds (> 0)
  std::optional<OnHang> on_hang;                    ///< --on-hang stop|restart|report
  std::optional<std::string> log_dir;
  bool allow_shared_log_dir = false;  ///< --allow-shared-log-dir
  std::optional<StdStreams> tee;
  std::optional<StdStreams> redirects;
  std::optional<std::vector<int>> local_ranks_filter;
  /// --log-line-prefix-template: the console prefix template (rank_env.h ConsolePrefix).
  std::optional<std::string> log_line_prefix_template;
  /// --duplicate-stdout-filters / --duplicate-stderr-filters: the substrings (',,' already a
  /// literal comma; an empty item matches every line, as in torchrun).
  std::optional<std::vector<std::string>> duplicate_stdout_filters;
  std::optional<std::vector<std::string>> duplicate_stderr_filters;
  std::optional<std::string> device;
  std::optional<DeviceBind> bind;
  std::optional<CpuAffinity> cpu_affinity;               ///< --cpu-affinity none|numa|spread
  std::vector<std::pair<std::string, std::string>> env;  ///< --env KEY=VALUE, in order
  std::optional<double> grace_period;
  std::optional<StdinMode> stdin_mode;
  std::optional<std::string> summary_json;
  std::optional<ExitScheme> exit_codes;        ///< --exit-codes rank|classes (outcome.h)
  std::optional<std::string> termination_log;  ///< --termination-log PATH|none
  std::optional<double> exit_barrier_timeout;  ///< --exit-barrier-timeout SECONDS
  bool no_agent_store = false;
  std::optional<int> worker_port;
  bool dry_run = false;
  std::optional<DryRunFormat> format;
  std::optional<std::string> sysroot;  ///< prefix for /dev and /sys look-ups (tests, preflight)
  std::optional<double> progress_interval;  ///< --progress-interval SECONDS (>= 0)
  bool no_python_faulthandler = false;      ///< --no-python-faulthandler

  // ---- metrics (docs/operations.md) ----
  std::optional<int> metrics_port;          ///< --metrics-port PORT: serve /metrics
  std::optional<std::string> metrics_addr;  ///< --metrics-addr ADDR: where (loopback)

  // ---- the store's memory bounds (docs/tcpstore-protocol.md section 6.1) ----
  std::optional<std::size_t> store_max_queued;    ///< --store-max-queued SIZE
  std::optional<std::size_t> store_max_buffered;  ///< --store-max-buffered SIZE

  // ---- who may steer the job (docs/security.md) ----
  std::optional<std::string> job_secret_file;  ///< --job-secret-file FILE
  std::optional<std::string> store_allow;      ///< --store-allow CIDR[,CIDR...]
  bool store_proxy = false;                    ///< --store-proxy (rendezvous/proxy.h)

  // torchrun flags that gculaunch maps onto its own notions or accepts with a note
  // (MakeLaunchSpec decides; see docs/command-line.md).
  std::optional<std::string> start_method;  ///< spawn|fork|forkserver: a note, no effect
  bool run_path = false;                    ///< --run-path: a note (ranks are processes)
  std::optional<std::string> local_addr;    ///< this node's advertised address
  std::optional<std::string> logs_specs;    ///< only "default" is accepted
  std::optional<std::vector<std::string>> signals_to_handle;  ///< "SIGTERM", ... (validated)
  std::optional<std::string> event_log_handler;               ///< a note, no effect
  bool virtual_local_rank = false;          ///< --virtual-local-rank: like --bind rank
  std::optional<std::string> numa_binding;  ///< node|socket|exclusive|core-complex

  /// SCRIPT (or the module with -m); empty only with CliParseMode::script_optional.
  std::string script;
  std::vector<std::string> script_args;  ///< everything after SCRIPT, untouched

  /// Canonical long name without dashes ("nproc-per-node") -> where it came
  /// from: "--nproc-per-node" or "PET_NPROC_PER_NODE".
  std::map<std::string, std::string> given;

  bool operator==(const CliOptions&) const = default;

  bool Given(std::string_view name) const { return given.find(std::string(name)) != given.end(); }
  /// How to name the flag in a message: "--nnodes" or "PET_NNODES"
  /// ("--nnodes" if it was not given).
  std::string Source(std::string_view name) const;
  /// True when the flag came from the command line (not PET_*).
  bool FromCommandLineForTest(std::string_view name) const;
};

enum class CliAction {
  kLaunch,   ///< launch or dry-run: `options` is filled
  kHelp,     ///< --help: print `text` to stdout, exit 0
  kVersion,  ///< --version: print `text` to stdout, exit 0
};

struct CliResult {
  CliAction action = CliAction::kLaunch;
  std::string text;  ///< kHelp / kVersion: what to print (ends with '\n')
  CliOptions options;
};

/// Variations of the command line for subcommands that reuse the launch flags.
struct CliParseMode {
  /// SCRIPT may be missing (`gculaunch check`); CliOptions::script is then empty.
  bool script_optional = false;
};

/// Parses the arguments after argv[0].  `env` supplies the PET_* fallbacks
/// (and nothing else).  Errors are one line ("--bind 'cards': expected all or
/// rank"); the caller prints Error::Format() and exits with exit_code::kUsage.
/// (--format also accepts `text` as another name for `table`.)
Result<CliResult> ParseCli(const std::vector<std::string>& args, const EnvMap& env,
                           const CliParseMode& mode = {});

/// How a launch whose command line may not parse exits (--exit-codes, --termination-log):
/// read from the raw arguments and the environment, so that a usage error anywhere else on a
/// command line that asks for --exit-codes classes (or PET_EXIT_CODES / GCULAUNCH_EXIT_CODES)
/// still exits with the class code, and writes its termination message.
struct ExitSettings {
  ExitScheme scheme = ExitScheme::kRank;
  std::optional<std::string> termination_log;  ///< as given; "none": off; empty: the default
};
/// Scans `args` up to SCRIPT ("--exit-codes classes", "--exit-codes=classes", either
/// spelling), then PET_EXIT_CODES and GCULAUNCH_EXIT_CODES; a value it does not know leaves
/// the default (ParseCli reports it).
ExitSettings ScanExitSettings(const std::vector<std::string>& args, const EnvMap& env);

/// The canonical name ("nproc-per-node") of a flag written without dashes in
/// either spelling ("nproc_per_node"); nullopt if there is no such flag.
std::optional<std::string> CanonicalFlagName(std::string_view name);

/// Whether `key` is one of --rdzv-conf's keys (the rendezvous keys and the etcd backend's).
bool IsRdzvConfKey(const std::string& key);

/// Every flag's canonical name, in help order (without --help and --version).
std::vector<std::string> CanonicalFlagNames();

/// The flags accepted for compatibility that change nothing in CliOptions (their table
/// entry applies `Ignored` in cli.cc); every other flag sets a field of its own.
std::vector<std::string> IgnoredFlagNames();

/// Applies one flag whose value comes as text from another source (a job
/// file), with the command line's checks and messages; `source` names it in
/// messages ("job.yaml:7: nproc_per_node") and is recorded in `given`.
/// Booleans take true/false (or an integer); "env" takes one KEY=VALUE.
/// REQUIRES: `flag` is canonical (CanonicalFlagName).
Status ApplyFlagText(std::string_view flag, const std::string& source, const std::string& value,
                     CliOptions& options);

/// "--nnodes 2" or "PET_NNODES=2": a flag's value as named in the layout line.
std::string DescribeFlag(const CliOptions& options, std::string_view name,
                         const std::string& value);

}  // namespace gculaunch
