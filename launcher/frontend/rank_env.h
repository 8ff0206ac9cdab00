// BuildRankEnv / BuildRankArgv: the complete environment and command line of
// one rank, as pure functions.
//
// The dry run prints their output and the spawner passes it unchanged, so
// what `gculaunch --dry-run` shows is exactly what a rank receives (a test
// compares it with /proc/<pid>/environ).
//
// Layering of variables, lowest to highest:
//   device profile env  <  the user's environment (`base`)  <  --env  <  what a version
//   manager's shim would export when the ranks run its interpreter directly
//   (spec.interpreter_env: PATH, PYENV_VERSION; ranks_python.h)
//   then defaults that apply only when that merged environment lacks them:
//     the NCCL error-handling variable the ranks' torch's torchrun sets
//     (NcclErrorHandlingVariables(spec.ranks_torch) in ranks_torch.h: torch < 2.2
//     NCCL_ASYNC_ERROR_HANDLING=1, >= 2.2 TORCH_NCCL_ASYNC_ERROR_HANDLING=1, both when
//     the version is not known), PYTHONUNBUFFERED=1,
//     OMP_NUM_THREADS=<spec.omp_num_threads_default>, PYTHONFAULTHANDLER=1 (unless
//     spec.python_faulthandler is false)
//   and then gculaunch's own per-rank variables (OwnedRankVariables(): LOCAL_RANK,
//   RANK, ..., the visible-devices variables, GCULAUNCH_*), which nothing
//   overrides: MakeLaunchSpec rejects --env for them.
//
// Device variables (only when the spec has a card pool):
//   visible-devices variables  --bind all: the whole pool ("4,5,6,7");
//                              --bind rank: pool[local_rank] ("6")
//   GCULAUNCH_DEVICE           the rank's card, as named in the pool ("6")
//   GCULAUNCH_DEVICE_INDEX     the index to pass to set_device()/gcu_device():
//                              --bind all: local_rank; --bind rank: 0
//   With more ranks than cards under --bind all, ranks share cards round-robin
//   (card pool[local_rank % n], index local_rank % n).
//   GCULAUNCH_BACKEND (the profile's backend, e.g. eccl) is always set.
//
// --cpu-affinity numa|spread: GCULAUNCH_CPUS is the rank's CPU list
// ("0-7,32-39"; the launch pins the rank to it before exec), and the
// OMP_NUM_THREADS default is the rank's CPU count instead of torchrun's 1.
//
// --python-shim adds the shim's variables and puts its directory first on
// PYTHONPATH (python_shim.h); without it, GCULAUNCH_SHIM_* inherited from
// an outer launch are removed.
//
// Thread safety: pure functions of their arguments.
#pragma once

#include <string>
#include <vector>

#include "base/env_map.h"
#include "launcher/frontend/device_profile.h"
#include "launcher/frontend/types.h"

namespace gculaunch {

struct LaunchSpec;  // launch_spec.h

/// What the launch decided at run time; each is used only when the spec left
/// it open (the dry run passes placeholders instead).
struct LaunchChoices {
  std::string chosen_port;       ///< used when spec.master_port == 0
  std::string generated_run_id;  ///< used when spec.run_id is empty
  std::string scratch_dir;       ///< rank_file_root: the private temporary directory
  std::string launcher_pid;      ///< getpid() of gculaunch (the parent of every rank)
  std::string proxy_port;        ///< the store proxy's loopback port, when ProxiesStore
};

/// The address of a node's store proxy; its port is chosen at launch.
inline constexpr const char* kProxyAddress = "127.0.0.1";

/// Whether this node runs a store proxy (--store-proxy): a multi-node job on the agent store
/// whose store this node does not host.  Its ranks' MASTER_ADDR/MASTER_PORT are then
/// kProxyAddress and the proxy's port (docs/multinode.md, "The store proxy").
bool ProxiesStore(const LaunchSpec& spec);

/// The RankRuntime of a launch: the spec's own values where it has them, else
/// the choices.  rank_file_root is choices.scratch_dir; log_root is RunLogRoot(spec,
/// run_id) when log files are written.  The real launch and the dry run both use this.
RankRuntime ResolveRankRuntime(const LaunchSpec& spec, const LaunchChoices& choices);

/// Everything the rank with `local_rank` gets in attempt `restart_count`.
/// `base` is gculaunch's own environment (as read by main).
/// REQUIRES: 0 <= local_rank < spec.nproc_per_node.
EnvMap BuildRankEnv(const LaunchSpec& spec, const EnvMap& base, int local_rank, int restart_count,
                    const RankRuntime& runtime);

/// The rank's argv: spec.argv with ${local_rank} substituted in argv[1..]
/// (which includes the --local_rank=${local_rank} that MakeLaunchSpec placed
/// there for --local-rank-arg).  The rules are torchrun's (Python's
/// string.Template.safe_substitute): "${local_rank}" and "$local_rank" become
/// the number, "$$" becomes "$", any other "$..." is kept.  argv[0] (the
/// interpreter, or the program with --no-python) is never substituted.
std::vector<std::string> BuildRankArgv(const LaunchSpec& spec, int local_rank);

/// What the console puts before each line of the rank with `local_rank`: "[rank<RANK>]: ", or
/// with spec.log_line_prefix_template (--log-line-prefix-template, else
/// TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE) that template with torch's placeholders ${role_name},
/// ${rank} (the global rank) and ${local_rank} replaced as BuildRankArgv replaces
/// ${local_rank} (Python's safe_substitute rules), used as it is: a template without a
/// placeholder is the same prefix for every rank, as in torch.
std::string ConsolePrefix(const LaunchSpec& spec, int local_rank);

/// The error file path of one rank in one attempt:
/// "<rank_file_root>/attempt_<restart_count>/<local_rank>/error.json".
std::string RankErrorFile(const RankRuntime& runtime, int restart_count, int local_rank);

/// With spec.file_timer: the FIFO of torch's file-timer watchdog, TORCHELASTIC_TIMER_FILE as
/// given, else "<rank_file_root>/watchdog_timer".  Empty without it.
std::string FileTimerPath(const LaunchSpec& spec, const RankRuntime& runtime);

/// The variables BuildRankEnv decides itself, whatever the layers below say
/// (torchrun's per-rank set, GCULAUNCH_*, the profile's visible-devices
/// variables); --env may not set them.
std::vector<std::string> OwnedRankVariables(const DeviceProfile& profile);

/// The rank contract: every variable a rank's environment holds because of gculaunch
/// (OwnedRankVariables, the defaults above, the profile's variables and --env), whether or
/// not gculaunch's own environment already had the same value.  The dry run lists all of
/// them.
std::vector<std::string> RankContractVariables(const LaunchSpec& spec);

/// The text shown in a visible-devices variable for a rank that has no card
/// left in the pool (dry run of --bind rank with too few cards only; a real
/// launch is rejected by MakeLaunchSpec before it could happen).
inline constexpr const char* kNoCardLeft = "<no card left in the pool>";

}  // namespace gculaunch
