// BuildRankEnv / BuildRankArgv: the complete environment and command line of
// one rank, as pure functions.
//
// The dry run prints their output and the spawner passes it unchanged, so
// what `gculaunch --dry-run` shows is exactly what a rank receives (a test
// compares it with /proc/<pid>/environ).
//
// Layering of variables, lowest to highest:
//   device profile env  <  the user's environment (`base`)  <  --env
//   and then gculaunch's own per-rank variables (LOCAL_RANK, RANK, ...,
//   visible devices), which nothing overrides: MakeLaunchSpec rejects --env
//   for them.
#pragma once

#include <string>
#include <vector>

#include "launcher/env_map.h"
#include "launcher/launch_spec.h"

namespace gculaunch {

/// Values known only when a launch happens.  The dry run fills them with
/// stated placeholders such as "<port chosen at launch>".
struct RankRuntime {
  std::string master_port;     ///< MASTER_PORT as exported
  std::string run_id;          ///< TORCHELASTIC_RUN_ID
  std::string error_file_root; ///< error files go to <root>/attempt_<n>/<local_rank>/error.json
};

/// Everything the rank with `local_rank` gets in attempt `restart_count`.
/// `base` is gculaunch's own environment (as read by main).
EnvMap BuildRankEnv(const LaunchSpec& spec, const EnvMap& base, int local_rank,
                    int restart_count, const RankRuntime& runtime);

/// The rank's argv: spec.argv with ${local_rank} substituted, plus
/// --local_rank=N when spec.local_rank_arg.
std::vector<std::string> BuildRankArgv(const LaunchSpec& spec, int local_rank);

/// The error file path of one rank in one attempt.
std::string RankErrorFile(const RankRuntime& runtime, int restart_count, int local_rank);

}  // namespace gculaunch
