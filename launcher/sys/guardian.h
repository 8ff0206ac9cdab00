// Guardian: a small helper process that kills the ranks' process groups when
// gculaunch dies without cleaning up (SIGKILL, OOM killer, a crash).
//
// Why: PR_SET_PDEATHSIG kills each rank when gculaunch dies, but not what the
// ranks started (shell wrappers' children, DataLoader workers, anything that
// outlives its parent).  Those stay in the rank's process group, so killing
// the recorded groups catches them.
//
// How: Start() forks a child that executes gculaunch's own binary
// (/proc/self/exe) in guardian mode, with the short argv
// {"gculaunch-guard", kGuardianFlag} and an empty environment: nothing of
// the launch's command line or environment (a password, say) is in the
// process that outlives a kill -9.  Where /proc/self/exe cannot be executed,
// the first guardian is a plain fork (gculaunch is still single-threaded
// then).  The guardian
//   - leads its own process group (a kill aimed at gculaunch's group misses it),
//   - ignores SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1/2 and the job-control
//     signals, so it outlives gculaunch on every stop path,
//   - reads its messages on descriptor 3, has /dev/null as stdin and stdout and
//     keeps gculaunch's stderr for the few lines it writes, and chdir("/"),
//   - reads newline-terminated messages from gculaunch:
//       "+<pgid> <start>"  a rank's group was started; <start> is the leader's start time
//                          (ProcessStartTime; 0: unknown)
//       "-<pgid>"          that group was confirmed empty (its number may be reused)
//       "scratch <path>"   gculaunch's temporary directory (error files)
//       "unlink <path>"    a file to remove at exit (the control socket)
//       "done"             clean shutdown: every group is empty
//   - on end-of-file without "done": SIGKILLs every recorded group, re-checks
//     them with one /proc scan per round for about 200 ms, and skips (with one
//     line) a group whose number now belongs to a process with another start
//     time: gculaunch's zombie no longer pins the number once gculaunch is gone;
//   - in both cases removes the "unlink" files and the scratch directory, then exits.  It also
//     cleans up after a gculaunch that was killed.
//
// gculaunch keeps the state it told the guardian (live groups with their start
// times, the scratch directory, the files) and queues messages the pipe cannot
// take yet (never drops them).  Maintain(), called about once a second, and
// every message notice a guardian that is gone (killed, crashed) or stuck (its
// queue passed `max_queue`): it is replaced by a new one to which the whole
// state is replayed, and `reporter` gets one line.  A guardian that cannot be
// replaced is reported once; gculaunch then runs without one.
//
// On every exit of gculaunch's own choosing the guardian is reaped before
// gculaunch exits (Done, Abandon, the destructor), so that "gculaunch has
// exited" means "nothing it started is left" to a harness that runs it twice
// in a row.  The wait is bounded (kReapBound): a guardian stuck removing the
// scratch directory (a hung file system) is left to finish on its own.  Only
// SIGKILL of gculaunch leaves the guardian running, by design, and only until
// it has done its work.
//
// Thread safety: gculaunch's main thread only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "launcher/sys/unique_fd.h"

namespace gculaunch::sys {

/// argv[1] of a guardian process.
inline constexpr char kGuardianFlag[] = "--gculaunch-guardian";

/// True when argv is a guardian's ({anything, kGuardianFlag}).
bool IsGuardianCommand(int argc, char** argv);
/// The guardian mode: reads messages on descriptor 3 until end-of-file, then
/// cleans up and exits.  Exits 2 with one line when descriptor 3 is not a pipe
/// (someone ran the flag by hand).
[[noreturn]] void RunGuardian();

struct GuardianOptions {
  /// The binary executed in guardian mode.  Tests name a binary whose main dispatches on
  /// IsGuardianCommand too.
  std::string program = "/proc/self/exe";
  /// Bytes of messages queued for a guardian that does not read; past it the guardian is
  /// declared stuck and replaced.
  size_t max_queue = 1 << 20;
  /// One line for gculaunch's log when a guardian was lost, stuck, replaced or could not be.
  std::function<void(const std::string&)> reporter;
};

class Guardian {
 public:
  /// Starts the guardian.  Call before any thread or socket exists.
  static Result<Guardian> Start(GuardianOptions options = {});

  Guardian(Guardian&& other) noexcept;
  Guardian& operator=(Guardian&&) = delete;
  Guardian(const Guardian&) = delete;
  ~Guardian();

  void set_reporter(std::function<void(const std::string&)> reporter) {
    options_.reporter = std::move(reporter);
  }

  /// A rank's group was started; `start_time` is its leader's (ProcessStartTime).
  void GroupStarted(pid_t pgid, unsigned long long start_time);
  /// That group is known empty: the guardian forgets it.
  void GroupGone(pid_t pgid);
  /// The guardian removes `path` (recursively) before it exits.
  void RemoveAtExit(const std::string& path);
  /// The guardian removes the file `path` (not recursively) before it exits: what
  /// gculaunch would remove itself, left behind when it is killed.
  void UnlinkAtExit(const std::string& path);

  /// Sends what is queued; replaces a guardian that exited or is stuck.  Call about once a
  /// second.  False once there is no guardian any more (it could not be replaced).
  bool Maintain();

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
  /// Guardians started after the first (lost or stuck ones replaced).
  int replacements() const { return replacements_; }
  /// Bytes waiting for the pipe.
  size_t queued() const { return queue_.size(); }

 private:
  Guardian(GuardianOptions options, pid_t pid, UniqueFd pipe)
      : options_(std::move(options)), pid_(pid), pipe_(std::move(pipe)) {}
  void Send(const std::string& message);
  /// Writes the queue; false when the guardian cannot take messages any more (EPIPE).
  bool Flush();
  void Replace(const std::string& why);
  void Report(const std::string& line) const;
  bool CloseAndReap(std::chrono::milliseconds bound);

  GuardianOptions options_;
  pid_t pid_ = -1;
  UniqueFd pipe_;
  std::string queue_;
  int replacements_ = 0;
  bool replacing_ = false;  ///< Replace() is running (a replay's Send must not re-enter it)
  // What the guardian was told, replayed to a replacement.
  std::map<pid_t, unsigned long long> groups_;
  std::string scratch_;
  std::vector<std::string> unlink_;
};

}  // namespace gculaunch::sys
