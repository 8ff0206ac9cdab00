// RunJob: a real launch of a LaunchSpec, from guardian to exit code.
//
//   1. process set-up: stdio open, SIGPIPE ignored, the script checked
//   2. the guardian forked (still single-threaded, no socket yet)
//   3. launch-time choices: run id, MASTER_PORT, error-file/log root
//   4. the event loop, writer thread, ChildWatcher, Spawner, Supervisor
//   5. the exit summary: stderr text, --summary-json, the parent launcher's
//      TORCHELASTIC_ERROR_FILE
//
// Thread safety: main thread; RunJob owns every object it creates.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <spdlog/logger.h>

#include "base/env_map.h"
#include "launcher/spec/launch_spec.h"
#include "launcher/run/logging.h"

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

}  // namespace gculaunch
