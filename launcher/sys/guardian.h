// Guardian: a small helper process that kills the ranks' process groups when
// gculaunch dies without cleaning up (SIGKILL, OOM killer, a crash).
//
// Why: PR_SET_PDEATHSIG kills each rank when gculaunch dies, but not what the
// ranks started (shell wrappers' children, DataLoader workers, anything that
// outlives its parent).  Those stay in the rank's process group, so killing
// the recorded groups catches them.
//
// How: Start() forks the guardian while gculaunch is still single-threaded
// and owns no sockets.  The guardian
//   - leads its own process group (a kill aimed at gculaunch's group misses it),
//   - ignores SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1/2 and the job-control
//     signals, so it outlives gculaunch on every stop path,
//   - keeps only the read end of one close-on-exec pipe (stdin/stdout/stderr
//     become /dev/null and every other descriptor is closed, so a harness
//     reading gculaunch's stdout sees EOF when gculaunch exits), and chdir("/"),
//   - reads newline-terminated messages from gculaunch:
//       "+<pgid>"          a rank's group was started
//       "-<pgid>"          that group was confirmed empty (its number may be reused)
//       "scratch <path>"   gculaunch's temporary directory (error files)
//       "unlink <path>"    a file to remove at exit (the control socket)
//       "done"             clean shutdown: every group is empty
//   - on end-of-file without "done": SIGKILLs every recorded group, re-checks
//     them briefly;
//   - in both cases removes the "unlink" files and the scratch directory, then exits.  It also
//     cleans up after a gculaunch that was killed.
//
// On every exit of gculaunch's own choosing the guardian is reaped before
// gculaunch exits (Done, Abandon, the destructor), so that "gculaunch has
// exited" means "nothing it started is left" to a harness that runs it twice
// in a row.  The wait is bounded (kReapBound): a guardian stuck removing the
// scratch directory (a hung file system) is left to finish on its own.  Only
// SIGKILL of gculaunch leaves the guardian running, by design.
//
// gculaunch writes with a non-blocking write end; a lost guardian is logged,
// never fatal.  The destructor closes the pipe without "done" (so an early
// return still tears down) and reaps the guardian.
//
// Thread safety: gculaunch's main thread only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>

#include "base/error.h"
#include "launcher/sys/unique_fd.h"

namespace gculaunch::sys {

class Guardian {
 public:
  /// Forks the guardian.  Call before any thread or socket exists.
  static Result<Guardian> Start();

  Guardian(Guardian&& other) noexcept;
  Guardian& operator=(Guardian&&) = delete;
  Guardian(const Guardian&) = delete;
  ~Guardian();

  void GroupStarted(pid_t pgid) { Send('+', pgid); }
  void GroupGone(pid_t pgid) { Send('-', pgid); }
  /// The guardian removes `path` (recursively) before it exits.
  void RemoveAtExit(const std::string& path);
  /// The guardian removes the file `path` (not recursively) before it exits: what
  /// gculaunch would remove itself, left behind when it is killed.
  void UnlinkAtExit(const std::string& path);
  /// How long Done, Abandon and the destructor wait for the guardian to exit.
  static constexpr std::chrono::milliseconds kReapBound{5000};

  /// Every group is empty: the guardian removes the scratch directory and
  /// exits without killing; waits for it (at most `bound`).  False when it
  /// had not exited in time (it finishes on its own; pid() stays set).
  bool Done(std::chrono::milliseconds bound = kReapBound);
  /// Closes the pipe without "done" (as if gculaunch had died) and reaps the
  /// guardian after it killed the recorded groups (at most `bound`).
  bool Abandon(std::chrono::milliseconds bound = kReapBound);

  pid_t pid() const { return pid_; }
  /// False once a message could not be delivered (the guardian is gone).
  bool healthy() const { return healthy_; }

 private:
  Guardian(pid_t pid, UniqueFd pipe) : pid_(pid), pipe_(std::move(pipe)) {}
  void Send(char op, pid_t pgid);
  void SendRaw(const char* data, size_t len);
  bool CloseAndReap(std::chrono::milliseconds bound);

  pid_t pid_ = -1;
  UniqueFd pipe_;
  bool healthy_ = true;
};

}  // namespace gculaunch::sys
