// The small value types that the command line, the job platform and the launch spec share:
// the choices of --bind, --stdin, the store, --format, --platform-world-size and
// --cpu-affinity, the --redirects/--tee stream sets, and a launch's RankRuntime (which the
// rank environment, the shim and the stack hook take).  Kept apart from launch_spec.h so that
// the parsers (cli.h, platform.h) need not see the whole spec.
//
// Thread safety: plain values.
#pragma once

#include <map>
#include <string>

namespace gculaunch {

enum class DeviceBind { kAll, kRank };   ///< --bind all|rank
enum class StdinMode { kNull, kRank0 };  ///< --stdin null|rank0
enum class StoreMode {
  kAgent,  ///< gculaunch hosts the TCPStore; TORCHELASTIC_USE_AGENT_STORE=True
  kRank0,  ///< rank 0 hosts it (torch 1.13 --standalone); TORCHELASTIC_USE_AGENT_STORE=False
};
enum class DryRunFormat { kTable, kJson, kEnv };   ///< --format table|json|env
enum class PlatformWorldSize { kNodes, kProcs };   ///< --platform-world-size nodes|procs
enum class CpuAffinity { kNone, kNuma, kSpread };  ///< --cpu-affinity none|numa|spread
enum class OnHang { kStop, kRestart, kReport };    ///< --on-hang stop|restart|report

/// --restart-backoff INITIAL:MAX in seconds (launcher/run/restart_backoff.h); initial_s 0:
/// off (restarts follow failures at once).
struct RestartBackoff {
  double initial_s = 1;
  double max_s = 60;
  bool operator==(const RestartBackoff&) const = default;
};

/// torchrun's --redirects / --tee value: which of a rank's streams go to its
/// log files.  Bits: 1 = stdout, 2 = stderr (so 3 = both, 0 = none); either
/// one value for every local rank ("3") or a per-local-rank map ("0:3,1:2",
/// ranks not listed get 0), exactly as torchrun parses it.
struct StdStreams {
  static constexpr int kStdout = 1;
  static constexpr int kStderr = 2;
  int all = 0;                  ///< used when per_rank is empty
  std::map<int, int> per_rank;  ///< local rank -> bits; if non-empty, `all` is ignored
  /// The bits for one local rank.
  int For(int local_rank) const;
  bool any() const { return all != 0 || !per_rank.empty(); }
  bool operator==(const StdStreams&) const = default;
};

/// Values known only when a launch happens.  The dry run fills them with
/// stated placeholders such as "<port chosen at launch>" (dry_run.h); ResolveRankRuntime
/// (rank_env.h) makes them.
struct RankRuntime {
  std::string master_port;  ///< MASTER_PORT as exported
  std::string run_id;       ///< TORCHELASTIC_RUN_ID
  /// gculaunch's private directory for every file a rank opens by name: error files
  /// (<root>/attempt_<n>/<local_rank>/error.json), stacks and heartbeat files, the hook and
  /// shim directories, the default watchdog timer.  Never inside --log-dir, which another
  /// user may be able to rename (docs/security.md).
  std::string rank_file_root;
  /// The run's log directory (rank logs, copies of the error files, events.jsonl, hang
  /// reports), as shown; empty without log files.  gculaunch reaches it by descriptor only.
  std::string log_root;
  std::string launcher_pid;  ///< gculaunch's pid (GCULAUNCH_SHIM_PARENT with --python-shim)
  /// MASTER_ADDR as exported when it is not spec.master_addr: this node's store proxy
  /// (--store-proxy); empty otherwise.  Last, so that {port, run_id, root} still reads as before.
  std::string master_addr;
};

}  // namespace gculaunch
