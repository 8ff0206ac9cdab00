// CommandRunner: runs one short helper program to completion, time-limited,
// and collects its output.  Used by `gculaunch check` for the Python probe
// (exactly the interpreter and environment a rank would get).
//
// This is not how ranks are started (that is the runtime's worker spawning):
// it is a blocking call for a single, short child.  The child leads its own
// process group, reads /dev/null, and gets default signal dispositions and an
// empty signal mask; on timeout the whole group is killed with SIGKILL (a probe
// that hangs in a driver call may have started helpers of its own) and reaped.
//
// Ownership: Run() returns only after the child has been reaped; it leaves no
// process behind except members of the group that survive SIGKILL (none can).
// Thread safety: LocalCommandRunner has no state; call Run() from one thread
// at a time per child (it blocks).
#pragma once

#include <string>
#include <vector>

#include "base/env_map.h"

namespace gculaunch {

struct CommandOutcome {
  enum class Kind {
    kExited,       ///< exited with `code`
    kSignaled,     ///< killed by signal `code`
    kTimedOut,     ///< still running at the deadline: its group was killed
    kSpawnFailed,  ///< could not be started: `error` says why
  };
  Kind kind = Kind::kExited;
  int code = 0;
  std::string out;    ///< stdout (at most kMaxOutput bytes kept)
  std::string err;    ///< stderr (at most kMaxOutput bytes kept)
  std::string error;  ///< kSpawnFailed: the reason, e.g. "No such file or directory"

  static constexpr size_t kMaxOutput = 1 << 20;
};

class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  /// Runs argv[0] (a path; no PATH search) with exactly `env`, for at most
  /// `timeout_s` seconds.  REQUIRES: !argv.empty().
  virtual CommandOutcome Run(const std::vector<std::string>& argv, const EnvMap& env,
                             double timeout_s) const = 0;
};

/// The real runner: posix_spawn, pipes for stdout/stderr, poll with a deadline.
class LocalCommandRunner : public CommandRunner {
 public:
  CommandOutcome Run(const std::vector<std::string>& argv, const EnvMap& env,
                     double timeout_s) const override;
};

}  // namespace gculaunch
