// gculaunch_no_pidfd: runs a program with pidfd_open(2) disabled, the way an
// old kernel (before 5.3) or a container's seccomp profile would.
//
//   gculaunch_no_pidfd [--errno ENOSYS|EPERM] PROGRAM [ARGS...]
//
// Installs a seccomp filter (after PR_SET_NO_NEW_PRIVS) that makes syscall
// 434 (pidfd_open, the same number on every architecture) fail with the given
// errno, then execs PROGRAM.  The filter is inherited by everything PROGRAM
// starts.  Used to prove that gculaunch detects the missing pidfd at run time
// and supervises through SIGCHLD + waitpid instead.
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/helpers/pidfd_filter.h"

int main(int argc, char** argv) {
  int err = ENOSYS;
  int first = 1;
  if (argc > 2 && strcmp(argv[1], "--errno") == 0) {
    if (strcmp(argv[2], "EPERM") == 0) {
      err = EPERM;
    } else if (strcmp(argv[2], "ENOSYS") != 0) {
      fprintf(stderr, "gculaunch_no_pidfd: --errno takes ENOSYS or EPERM, not %s\n", argv[2]);
      return 2;
    }
    first = 3;
  }
  if (first >= argc) {
    fprintf(stderr, "usage: gculaunch_no_pidfd [--errno ENOSYS|EPERM] PROGRAM [ARGS...]\n");
    return 2;
  }
  if (InstallNoPidfdFilter(err) != 0) {
    perror("gculaunch_no_pidfd: cannot install the seccomp filter");
    return 2;
  }
  execvp(argv[first], argv + first);
  fprintf(stderr, "gculaunch_no_pidfd: cannot run %s: %s\n", argv[first], strerror(errno));
  return 127;
}
