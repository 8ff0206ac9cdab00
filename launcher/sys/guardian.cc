#include "launcher/sys/guardian.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "launcher/sys/child_setup.h"
#include "launcher/sys/process_group.h"
#include "launcher/sys/worker_exit.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

namespace gculaunch::sys {
namespace {

// Closes every descriptor above 2 except `keep` (the guardian is single-threaded here).
void CloseAllExcept(int keep) {
  const bool below_ok =
      keep <= 3 || ::syscall(SYS_close_range, 3U, static_cast<unsigned>(keep - 1), 0U) == 0;
  if (below_ok && ::syscall(SYS_close_range, static_cast<unsigned>(keep + 1), ~0U, 0U) == 0) {
    return;
  }
  const long max_fd = ::sysconf(_SC_OPEN_MAX);
  for (int fd = 3; fd < (max_fd > 0 ? max_fd : 65536); ++fd) {
    if (fd != keep) ::close(fd);
  }
}

// Waits for the child `pid` to exit, at most `bound`; reaps it.  True when reaped (or not
// ours any more).  A pidfd wakes the wait the moment the guardian exits; without one
// (kernels before 5.3, seccomp) it polls with short, growing pauses.
bool ReapWithin(pid_t pid, std::chrono::milliseconds bound) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  long pause_us = 50;
  bool reaped = false;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) {
      reaped = true;
      break;
    }
    if (r < 0 && errno == EINTR) continue;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      (void)::poll(&p, 1, static_cast<int>(left.count()) + 1);
      continue;
    }
    timespec ts{0, pause_us * 1000L};
    ::nanosleep(&ts, nullptr);
    pause_us = std::min(pause_us * 2, 5000L);
  }
  if (pidfd >= 0) ::close(pidfd);
  return reaped;
}

void SleepMs(long ms) {
  timespec ts{0, ms * 1000000L};
  while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// The signals the guardian ignores.  They are blocked across fork() so that
// one arriving before the guardian ignores it cannot act on the guardian with
// gculaunch's dispositions (setting SIG_IGN discards a pending signal).
sigset_t IgnoredSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig :
       {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU}) {
    sigaddset(&set, sig);
  }
  return set;
}

// Own group, name, ignored signals, empty mask.
void BecomeGuardian() {
  ::setpgid(0, 0);
  ::prctl(PR_SET_NAME, "gculaunch-guard");
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  const sigset_t ignored = IgnoredSignals();
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sigismember(&ignored, sig) == 1) ::sigaction(sig, &ignore, nullptr);
  }
  sigset_t empty;
  sigemptyset(&empty);
  ::sigprocmask(SIG_SETMASK, &empty, nullptr);
  if (::chdir("/") != 0) {
    // Not fatal: it only keeps a directory busy.
  }
}

// What the guardian was told.
struct GuardianState {
  std::map<pid_t, unsigned long long> groups;  ///< pgid -> its leader's start time
  std::string scratch;
  std::vector<std::string> files;
  bool done = false;

  void Apply(const std::string& msg) {
    if (msg == "done") {
      done = true;
    } else if (msg.rfind("scratch ", 0) == 0) {
      scratch = msg.substr(8);
    } else if (msg.rfind("unlink ", 0) == 0) {
      files.push_back(msg.substr(7));
    } else if (msg.size() > 1 && (msg[0] == '+' || msg[0] == '-')) {
      char* end = nullptr;
      const long pgid = std::strtol(msg.c_str() + 1, &end, 10);
      if (pgid <= 1) return;
      if (msg[0] == '+') {
        groups[static_cast<pid_t>(pgid)] = std::strtoull(end, nullptr, 10);
      } else {
        groups.erase(static_cast<pid_t>(pgid));
      }
    }
  }
};

// True when the number `pgid` now names a process other than the leader that gculaunch
// started at `start_time` (0: unknown, never "reused").  While the leader lives or is
// gculaunch's zombie the start times match; once it is reaped, a process holding the
// number is a stranger, and the group of that number is the stranger's.
bool NumberReused(pid_t pgid, unsigned long long start_time) {
  if (start_time == 0) return false;
  const unsigned long long now = ProcessStartTime(pgid);
  return now != 0 && now != start_time;
}

// SIGKILLs every group, then looks again (one /proc scan per round, about 200 ms at most)
// for processes that were forking while the signal went out.  Returns the lines to log.
std::vector<std::string> KillGroups(std::map<pid_t, unsigned long long> groups) {
  std::vector<std::string> notes;
  for (int round = 0; round <= 20 && !groups.empty(); ++round) {
    if (round > 0) {
      SleepMs(10);
      std::set<pid_t> asked;
      for (const auto& [pgid, start] : groups) asked.insert(pgid);
      if (auto live = LiveGroups(asked); live.ok()) {
        std::erase_if(groups, [&](const auto& g) { return live->count(g.first) == 0; });
      }
    }
    for (auto it = groups.begin(); it != groups.end();) {
      if (NumberReused(it->first, it->second)) {
        notes.push_back("gculaunch-guard: left process group " + std::to_string(it->first) +
                        " alone: its number now belongs to another process (not a rank)");
        it = groups.erase(it);
        continue;
      }
      SignalGroup(it->first, SIGKILL);
      ++it;
    }
  }
  return notes;
}

// The guardian's life after setup: read messages until end-of-file, then clean up.
// `log_fd` < 0: nowhere to write.
[[noreturn]] void GuardianLoop(int read_fd, int log_fd) {
  GuardianState state;
  std::string pending;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(read_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // gculaunch closed the pipe or died
    pending.append(buf, static_cast<size_t>(n));
    size_t begin = 0;
    for (size_t nl; (nl = pending.find('\n', begin)) != std::string::npos; begin = nl + 1) {
      state.Apply(pending.substr(begin, nl - begin));
    }
    pending.erase(0, begin);
  }
  std::vector<std::string> notes;
  if (!state.done) notes = KillGroups(state.groups);
  for (const std::string& file : state.files) ::unlink(file.c_str());
  if (!state.scratch.empty()) {
    std::error_code not_fatal;
    std::filesystem::remove_all(state.scratch, not_fatal);
  }
  // Last: a full stderr pipe that nobody reads can only delay the exit, never the cleanup.
  for (std::string& note : notes) {
    note += '\n';
    if (log_fd >= 0 && ::write(log_fd, note.data(), note.size()) < 0) break;
  }
  ::_exit(0);
}

// A forked guardian that does not exec (no /proc/self/exe): only while single-threaded.
[[noreturn]] void ForkedGuardianMain(int read_fd) {
  BecomeGuardian();
  const int devnull = ::open("/dev/null", O_RDWR);
  if (devnull >= 0) {
    ::dup2(devnull, 0);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
  }
  CloseAllExcept(read_fd);
  GuardianLoop(read_fd, -1);
}

// In the forked child, before exec: async-signal-safe calls only (gculaunch may have
// threads).  Descriptor 3 becomes the message pipe; 0 and 1 /dev/null; 2 is kept.
[[noreturn]] void ExecGuardianChild(int read_fd, int status_fd, const char* program,
                                    const char* const* argv, const char* const* envp) {
  ::setpgid(0, 0);
  if (status_fd == 3) status_fd = ::fcntl(3, F_DUPFD_CLOEXEC, 4);  // 3 becomes the pipe
  const int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull >= 0) {
    ::dup2(devnull, 0);
    ::dup2(devnull, 1);
  }
  MarkAllCloexecAbove2();
  if (read_fd == 3) {
    ::fcntl(3, F_SETFD, 0);
  } else {
    ::dup2(read_fd, 3);
  }
  ::execve(program, const_cast<char* const*>(argv), const_cast<char* const*>(envp));
  const int err = errno;
  (void)::write(status_fd, &err, sizeof err);
  ::_exit(127);
}

struct Started {
  pid_t pid = -1;
  UniqueFd pipe;  ///< the write end, non-blocking
};

// Starts a guardian: `program` executed in guardian mode, or (`may_fork_only`, when exec
// is not possible) a plain fork running the guardian's code.
Result<Started> StartGuardianProcess(const std::string& program, bool may_fork_only) {
  auto pipe = MakePipe("guardian");
  if (!pipe.ok()) return pipe.error();
  auto status = MakePipe("guardian start");
  if (!status.ok()) return status.error();
  const char* argv[] = {"gculaunch-guard", kGuardianFlag, nullptr};
  const char* envp[] = {nullptr};
  const sigset_t ignored = IgnoredSignals();
  sigset_t old_mask;
  ::pthread_sigmask(SIG_BLOCK, &ignored, &old_mask);
  pid_t pid = ::fork();
  if (pid == 0) {
    ExecGuardianChild(pipe->read.get(), status->write.get(), program.c_str(), argv, envp);
  }
  int fork_errno = errno;
  int exec_errno = 0;
  if (pid > 0) {
    status->write.Reset();
    ssize_t n;
    while ((n = ::read(status->read.get(), &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {
    }
    if (n == static_cast<ssize_t>(sizeof exec_errno)) {
      while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
      pid = -1;
      if (may_fork_only) {
        pid = ::fork();
        if (pid == 0) {
          pipe->write.Reset();
          ForkedGuardianMain(pipe->read.Release());
        }
        fork_errno = errno;
      }
    }
  }
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  if (pid < 0 && exec_errno != 0 && !may_fork_only) {
    return SysError("cannot execute " + program + " as the guardian", exec_errno);
  }
  if (pid < 0) {
    return SysError("cannot fork the guardian process", fork_errno,
                    "raise the process limit (ulimit -u) or free memory");
  }
  pipe->read.Reset();
  // Never block gculaunch on the guardian (a stopped guardian must not stall
  // supervision); this is gculaunch's own pipe, not inherited stdio.
  (void)SetNonBlocking(pipe->write.get(), true);
  return Started{pid, std::move(pipe->write)};
}

// "exited with code 3", "was killed by SIGKILL": how the child `pid` ended, if it has
// (waitid WNOWAIT: not reaped); empty while it runs.
std::string HowItEnded(pid_t pid) {
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    return errno == ECHILD ? "is gone" : "";
  }
  if (info.si_pid != pid) return "";
  if (info.si_code == CLD_EXITED) return "exited with code " + std::to_string(info.si_status);
  return "was killed by " + SignalName(info.si_status);
}

constexpr int kMaxReplacements = 10;

}  // namespace

bool IsGuardianCommand(int argc, char** argv) {
  return argc == 2 && std::strcmp(argv[1], kGuardianFlag) == 0;
}

void RunGuardian() {
  struct stat st {};
  if (::fstat(3, &st) != 0 || !S_ISFIFO(st.st_mode)) {
    static const char kLine[] =
        "gculaunch: --gculaunch-guardian is the mode gculaunch starts its own guardian in "
        "(fix: run gculaunch without it)\n";
    (void)::write(2, kLine, sizeof kLine - 1);
    ::_exit(2);
  }
  BecomeGuardian();
  CloseAllExcept(3);  // 0, 1 (/dev/null) and 2 (gculaunch's stderr) stay
  GuardianLoop(3, 2);
}

Result<Guardian> Guardian::Start(GuardianOptions options) {
  auto started = StartGuardianProcess(options.program, /*may_fork_only=*/true);
  if (!started.ok()) return started.error();
  return Guardian(std::move(options), started->pid, std::move(started->pipe));
}

Guardian::Guardian(Guardian&& other) noexcept
    : options_(std::move(other.options_)),
      pid_(std::exchange(other.pid_, -1)),
      pipe_(std::move(other.pipe_)),
      queue_(std::move(other.queue_)),
      replacements_(other.replacements_),
      groups_(std::move(other.groups_)),
      scratch_(std::move(other.scratch_)),
      unlink_(std::move(other.unlink_)) {}

Guardian::~Guardian() { (void)CloseAndReap(kReapBound); }

void Guardian::GroupStarted(pid_t pgid, unsigned long long start_time) {
  groups_[pgid] = start_time;
  Send("+" + std::to_string(pgid) + " " + std::to_string(start_time) + "\n");
}

void Guardian::GroupGone(pid_t pgid) {
  groups_.erase(pgid);
  Send("-" + std::to_string(pgid) + "\n");
}

void Guardian::RemoveAtExit(const std::string& path) {
  if (path.empty() || path.find('\n') != std::string::npos) return;
  scratch_ = path;
  Send("scratch " + path + "\n");
}

void Guardian::UnlinkAtExit(const std::string& path) {
  if (path.empty() || path.find('\n') != std::string::npos) return;
  unlink_.push_back(path);
  Send("unlink " + path + "\n");
}

void Guardian::Send(const std::string& message) {
  if (pid_ <= 0 || !pipe_.valid()) return;  // no guardian: it could not be replaced
  queue_ += message;
  if (!Flush()) {
    const std::string ended = HowItEnded(pid_);
    Replace(ended.empty() ? "stopped taking messages" : ended);
  } else if (queue_.size() > options_.max_queue) {
    Replace("did not read its messages (" + std::to_string(queue_.size()) + " bytes queued)");
  }
}

bool Guardian::Flush() {
  while (!queue_.empty()) {
    const ssize_t n = ::write(pipe_.get(), queue_.data(), queue_.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;  // sent later
    if (n <= 0) return false;                                             // EPIPE: gone
    queue_.erase(0, static_cast<size_t>(n));
  }
  return true;
}

bool Guardian::Maintain() {
  if (pid_ <= 0 || !pipe_.valid()) return false;
  if (const std::string ended = HowItEnded(pid_); !ended.empty()) {
    Replace(ended);
  } else if (!Flush()) {
    Replace("stopped taking messages");
  }
  return pid_ > 0;
}

void Guardian::Replace(const std::string& why) {
  if (replacing_) return;
  replacing_ = true;
  const pid_t old = pid_;
  pipe_.Reset();
  queue_.clear();
  // Ours until reaped: a stuck guardian is killed (it would kill nothing after this
  // anyway: its pipe is closed only when it reads again).
  if (HowItEnded(old).empty()) SignalProcess(old, SIGKILL);
  (void)ReapWithin(old, std::chrono::seconds(1));  // bounded: never stall the job's loop
  pid_ = -1;
  const std::string lost = "the guardian process (pid " + std::to_string(old) + ") " + why;
  auto started = replacements_ < kMaxReplacements
                     ? StartGuardianProcess(options_.program, /*may_fork_only=*/false)
                     : Result<Started>(Error{"replaced too often already", ""});
  if (!started.ok()) {
    Report(lost + "; no new one could be started (" + started.error().what +
           "): processes the ranks start may outlive gculaunch if it is killed");
    replacing_ = false;
    return;
  }
  pid_ = started->pid;
  pipe_ = std::move(started->pipe);
  ++replacements_;
  for (const auto& [pgid, start] : groups_) {
    queue_ += "+" + std::to_string(pgid) + " " + std::to_string(start) + "\n";
  }
  if (!scratch_.empty()) queue_ += "scratch " + scratch_ + "\n";
  for (const std::string& file : unlink_) queue_ += "unlink " + file + "\n";
  (void)Flush();  // what does not fit now goes with the next message or Maintain()
  Report(lost + "; started a new one (pid " + std::to_string(pid_) + ") and gave it the " +
         std::to_string(groups_.size()) + " live process group(s)");
  replacing_ = false;
}

void Guardian::Report(const std::string& line) const {
  if (options_.reporter) options_.reporter(line);
}

bool Guardian::Done(std::chrono::milliseconds bound) {
  if (pipe_.valid()) {
    queue_ += "done\n";
    (void)Flush();
  }
  return CloseAndReap(bound);
}

bool Guardian::Abandon(std::chrono::milliseconds bound) { return CloseAndReap(bound); }

bool Guardian::CloseAndReap(std::chrono::milliseconds bound) {
  pipe_.Reset();
  if (pid_ <= 0) return true;
  if (!ReapWithin(pid_, bound)) return false;
  pid_ = -1;
  return true;
}

}  // namespace gculaunch::sys
