#include "launcher/sys/guardian.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "launcher/sys/process_group.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

namespace gculaunch::sys {
namespace {

// Closes every descriptor except `keep` (the guardian is single-threaded here).
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

// The guardian process.  Never returns.
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

[[noreturn]] void GuardianMain(int read_fd) {
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
  const int devnull = ::open("/dev/null", O_RDWR);
  if (devnull >= 0) {
    ::dup2(devnull, 0);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
  }
  CloseAllExcept(read_fd);
  if (::chdir("/") != 0) {
    // Not fatal: it only keeps a directory busy.
  }

  std::set<pid_t> groups;
  std::string pending;
  std::string scratch;
  std::vector<std::string> files;
  bool done = false;
  char buf[512];
  for (;;) {
    const ssize_t n = ::read(read_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // gculaunch closed the pipe or died
    pending.append(buf, static_cast<size_t>(n));
    size_t nl;
    while ((nl = pending.find('\n')) != std::string::npos) {
      const std::string msg = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      if (msg == "done") {
        done = true;
      } else if (msg.rfind("scratch ", 0) == 0) {
        scratch = msg.substr(8);
      } else if (msg.rfind("unlink ", 0) == 0) {
        files.push_back(msg.substr(7));
      } else if (msg.size() > 1 && (msg[0] == '+' || msg[0] == '-')) {
        const long pgid = std::strtol(msg.c_str() + 1, nullptr, 10);
        if (pgid > 1) {
          if (msg[0] == '+') {
            groups.insert(static_cast<pid_t>(pgid));
          } else {
            groups.erase(static_cast<pid_t>(pgid));
          }
        }
      }
    }
  }
  if (!done) {
    for (pid_t pgid : groups) SignalGroup(pgid, SIGKILL);
    // A process that was forking while the first signal went out is caught
    // by a second look; bounded to about 200 ms.
    for (int round = 0; round < 20 && !groups.empty(); ++round) {
      SleepMs(10);
      for (auto it = groups.begin(); it != groups.end();) {
        if (GroupAlive(*it)) {
          SignalGroup(*it, SIGKILL);
          ++it;
        } else {
          it = groups.erase(it);
        }
      }
    }
  }
  for (const std::string& file : files) ::unlink(file.c_str());
  if (!scratch.empty()) {
    std::error_code not_fatal;
    std::filesystem::remove_all(scratch, not_fatal);
  }
  ::_exit(0);
}

}  // namespace

Result<Guardian> Guardian::Start() {
  auto pipe = MakePipe("guardian");
  if (!pipe.ok()) return pipe.error();
  const sigset_t ignored = IgnoredSignals();
  sigset_t old_mask;
  ::pthread_sigmask(SIG_BLOCK, &ignored, &old_mask);
  const pid_t pid = ::fork();
  if (pid == 0) {
    pipe->write.Reset();
    GuardianMain(pipe->read.Release());
  }
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  if (pid < 0) {
    return SysError("cannot fork the guardian process", fork_errno,
                    "raise the process limit (ulimit -u) or free memory");
  }
  pipe->read.Reset();
  // Never block gculaunch on the guardian (a stopped guardian must not stall
  // supervision); this is gculaunch's own pipe, not inherited stdio.
  (void)SetNonBlocking(pipe->write.get(), true);
  return Guardian(pid, std::move(pipe->write));
}

Guardian::Guardian(Guardian&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      pipe_(std::move(other.pipe_)),
      healthy_(other.healthy_) {}

Guardian::~Guardian() { (void)CloseAndReap(kReapBound); }

void Guardian::Send(char op, pid_t pgid) {
  char msg[32];
  const int len = std::snprintf(msg, sizeof msg, "%c%d\n", op, static_cast<int>(pgid));
  SendRaw(msg, static_cast<size_t>(len));
}

void Guardian::SendRaw(const char* data, size_t len) {
  if (!pipe_.valid() || !healthy_) return;
  while (len > 0) {
    const ssize_t n = ::write(pipe_.get(), data, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      healthy_ = false;  // EPIPE: the guardian is gone; EAGAIN: it stopped reading
      return;
    }
    data += n;
    len -= static_cast<size_t>(n);
  }
}

void Guardian::RemoveAtExit(const std::string& path) {
  if (path.empty() || path.find('\n') != std::string::npos) return;
  const std::string msg = "scratch " + path + "\n";
  SendRaw(msg.data(), msg.size());
}

void Guardian::UnlinkAtExit(const std::string& path) {
  if (path.empty() || path.find('\n') != std::string::npos) return;
  const std::string msg = "unlink " + path + "\n";
  SendRaw(msg.data(), msg.size());
}

bool Guardian::Done(std::chrono::milliseconds bound) {
  SendRaw("done\n", 5);
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
