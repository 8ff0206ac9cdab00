// RunJob: a real launch of a LaunchSpec, from guardian to exit code.
//
//   1. process set-up: stdio open, SIGPIPE ignored, the script checked
//   2. the guardian forked (still single-threaded, no socket yet)
//   3. launch-time choices: run id, MASTER_PORT, error-file/log root
//   4. the event loop, writer thread, ChildWatcher, Spawner, Supervisor
//   5. the exit summary: stderr text, --summary-json, the parent launcher's
//      TORCHELASTIC_ERROR_FILE
//
// JobPlanner builds each attempt's ranks from the same pure functions the
// dry run prints (BuildRankEnv, BuildRankArgv, RankErrorFile), creates the
// attempt's directories and removes any error file left in them, so a stale
// file can never be taken for a new one.
//
// Thread safety: main thread; RunJob owns every object it creates.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <spdlog/logger.h>

#include "launcher/env_map.h"
#include "launcher/launch_spec.h"
#include "launcher/logging.h"
#include "launcher/rank_env.h"
#include "launcher/supervisor.h"

namespace gculaunch {

struct JobOptions {
  bool force_sigchld = false;                 ///< GCULAUNCH_CHILD_WATCHER=sigchld
  std::chrono::milliseconds kill_wait{5000};  ///< SIGKILL -> stuck report
  std::chrono::milliseconds output_flush{10000};  ///< at exit, for a console that does not drain
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
};

/// Runs the job; returns gculaunch's exit code (exit_codes.h).
int RunJob(const LaunchSpec& spec, const EnvMap& env, spdlog::logger& log, LogSink& sink,
           const JobOptions& options);

/// The ranks of each attempt, for the Supervisor.
class JobPlanner : public AttemptPlanner {
 public:
  JobPlanner(const LaunchSpec& spec, const EnvMap& base, RankRuntime runtime,
             bool rank0_takes_terminal)
      : spec_(spec), base_(base), runtime_(std::move(runtime)),
        rank0_takes_terminal_(rank0_takes_terminal) {}
  Result<std::vector<RankLaunch>> PlanAttempt(int restart_count) override;

  /// Multi-node: the layout the job assigned (job_protocol.h JobPlan): this node's first
  /// global rank, the job's WORLD_SIZE and the ranks' MASTER_PORT.  Later attempts use it.
  void ApplyLayout(int rank_offset, int world_size, const std::string& ranks_port);

 private:
  LaunchSpec spec_;  ///< a copy: ApplyLayout changes the rank offset and world size
  const EnvMap& base_;
  RankRuntime runtime_;
  bool rank0_takes_terminal_;
};

/// The Python script a python-mode spec runs (argv {python, "-u", SCRIPT,
/// ...}), or "" for -m and --no-python.
std::string ScriptOf(const std::vector<std::string>& rank_argv, const LaunchSpec& spec);

/// A fresh random run id (UUID form), for --standalone without --run-id.
std::string NewRunId();

}  // namespace gculaunch
