// RankPlanner: the ranks of each attempt, built from the same pure functions the dry run
// prints (BuildRankEnv, BuildRankArgv, RankErrorFile).  It creates the attempt's directories
// and removes any error file left in them, so a stale file can never be taken for a new one.
//
// Thread safety: one thread (the Supervisor's).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/env_map.h"
#include "launcher/frontend/launch_spec.h"
#include "launcher/frontend/rank_env.h"
#include "launcher/run/rank_record.h"

namespace gculaunch {

/// The ranks of each attempt, for the Supervisor.
class RankPlanner : public AttemptPlanner {
 public:
  /// `log_dir`: the run's log directory when log files are written (WantsLogFiles).
  RankPlanner(const LaunchSpec& spec, const EnvMap& base, RankRuntime runtime,
              bool rank0_takes_terminal, std::optional<sys::HeldDir> log_dir = std::nullopt)
      : spec_(spec),
        base_(base),
        runtime_(std::move(runtime)),
        rank0_takes_terminal_(rank0_takes_terminal),
        log_dir_(std::move(log_dir)) {}
  Result<std::vector<RankLaunch>> PlanAttempt(int restart_count) override;

  /// Multi-node: the layout the job assigned for an epoch (job_protocol.h JobPlan).  Later
  /// attempts use it.
  struct Layout {
    int rank_offset = 0;      ///< RANK of local rank 0
    int world_size = 1;       ///< WORLD_SIZE
    int node_rank = 0;        ///< GROUP_RANK
    int nnodes = 1;           ///< GROUP_WORLD_SIZE
    int restarts = -1;        ///< TORCHELASTIC_RESTART_COUNT; -1: the attempt's number
    std::string ranks_port;   ///< the ranks' MASTER_PORT
    std::string master_addr;  ///< the ranks' MASTER_ADDR; "": the spec's
  };
  void ApplyLayout(const Layout& layout);

  /// The ranks of the attempt planned last, as their environment says: WORLD_SIZE and
  /// TORCHELASTIC_RESTART_COUNT (readiness looks for their keys in the store).
  struct Planned {
    int world_size = 0;  ///< 0: nothing planned yet
    int restarts = 0;
  };
  Planned planned() const { return planned_; }

 private:
  LaunchSpec spec_;  ///< a copy: ApplyLayout changes the rank offset and world size
  const EnvMap& base_;
  RankRuntime runtime_;
  bool rank0_takes_terminal_;
  std::optional<sys::HeldDir> log_dir_;
  int restarts_ = -1;  ///< Layout::restarts
  Planned planned_;
};

/// The Python script a python-mode spec runs (argv {python, "-u", SCRIPT,
/// ...}), or "" for -m and --no-python.
std::string ScriptOf(const std::vector<std::string>& rank_argv, const LaunchSpec& spec);

/// A fresh random run id (UUID form), for --standalone without --run-id.
std::string NewRunId();

}  // namespace gculaunch
