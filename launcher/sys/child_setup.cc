#include "launcher/sys/child_setup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

namespace gculaunch::sys {
namespace {

struct LinuxDirent64 {
  ino64_t d_ino;
  off64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[1];
};

void SetCloexec(int fd) noexcept {
  const int flags = ::fcntl(fd, F_GETFD);
  if (flags >= 0 && !(flags & FD_CLOEXEC)) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

// /proc/self/fd walk with a stack buffer; returns false when /proc is unusable.
bool MarkCloexecFromProc() noexcept {
  const int dir = ::open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return false;
  alignas(8) char buf[4096];
  for (;;) {
    const long n = ::syscall(SYS_getdents64, dir, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      const auto* entry = reinterpret_cast<const LinuxDirent64*>(buf + off);
      off += entry->d_reclen;
      int fd = 0;
      const char* p = entry->d_name;
      if (*p < '0' || *p > '9') continue;
      for (; *p >= '0' && *p <= '9'; ++p) fd = fd * 10 + (*p - '0');
      if (fd > 2 && fd != dir) SetCloexec(fd);
    }
  }
  ::close(dir);
  return true;
}

}  // namespace

void MarkAllCloexecAbove2() noexcept {
  if (::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
  if (MarkCloexecFromProc()) return;
  rlimit limit{};
  rlim_t max_fd = 65536;
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    max_fd = limit.rlim_cur;
  }
  if (max_fd > (1U << 20)) max_fd = 1U << 20;
  for (int fd = 3; fd < static_cast<int>(max_fd); ++fd) SetCloexec(fd);
}

int RunChildSetup(const ChildSetupParams& params) noexcept {
  // 1. Own process group.
  if (::setpgid(0, 0) != 0) return errno;

  // 2. The terminal, for rank 0 with --stdin rank0.  A background group may
  //    only call tcsetpgrp() with SIGTTOU blocked; the mask is reset below.
  if (params.take_terminal) {
    sigset_t ttou;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    ::sigprocmask(SIG_BLOCK, &ttou, nullptr);
    ::tcsetpgrp(STDIN_FILENO, ::getpid());
  }

  // 3. Die with gculaunch.  The death signal is tied to the forking thread
  //    (gculaunch's main thread, which lives until exit).  If gculaunch died
  //    before prctl() ran, we were re-parented and the signal will never come.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return errno;
  if (::getppid() != params.parent_pid) ::raise(SIGKILL);

  // 4. Default dispositions, empty mask.  Caught signals reset on exec anyway;
  //    ignored ones (SIGPIPE in gculaunch, SIGINT under `&`) would not.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    ::sigaction(sig, &dfl, nullptr);  // EINVAL for the C library's internal signals: fine
  }
  sigset_t empty;
  sigemptyset(&empty);
  if (::sigprocmask(SIG_SETMASK, &empty, nullptr) != 0) return errno;

  // 5. Standard streams.  dup2() clears close-on-exec on the target.
  if (params.stdin_fd >= 0 && params.stdin_fd != STDIN_FILENO &&
      ::dup2(params.stdin_fd, STDIN_FILENO) < 0) {
    return errno;
  }
  if (params.stdout_fd >= 0 && params.stdout_fd != STDOUT_FILENO &&
      ::dup2(params.stdout_fd, STDOUT_FILENO) < 0) {
    return errno;
  }
  if (params.stderr_fd >= 0 && params.stderr_fd != STDERR_FILENO &&
      ::dup2(params.stderr_fd, STDERR_FILENO) < 0) {
    return errno;
  }

  // 6. Nothing else crosses exec.
  MarkAllCloexecAbove2();

  // 7. --cpu-affinity: the rank's CPUs (inherited by everything it starts).
  if (params.pin_cpus && ::sched_setaffinity(0, sizeof(params.cpus), &params.cpus) != 0) {
    return errno;
  }

  // 8. The open-file limit gculaunch was started with.
  if (params.open_files != 0) {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != params.open_files) {
      limit.rlim_cur = params.open_files < limit.rlim_max ? params.open_files : limit.rlim_max;
      if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) return errno;
    }
  }

  // 9. A lower priority (only ever lower: the parent checked it may raise it again).
  if (params.set_priority) {
    sched_param param{};
    if (::sched_setscheduler(0, params.policy, &param) != 0) return errno;
    if (::setpriority(PRIO_PROCESS, 0, params.nice) != 0) return errno;
  }
  return 0;
}

}  // namespace gculaunch::sys
