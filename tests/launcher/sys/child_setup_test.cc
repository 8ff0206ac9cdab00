#include "launcher/sys/child_setup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

namespace gculaunch::sys {

TEST_CASE("MarkAllCloexecAbove2 marks every descriptor above 2", "[child_setup]") {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int a = ::open("/dev/null", O_RDONLY);  // not close-on-exec
    const int b = ::fcntl(a, F_DUPFD, 300);       // a high number
    MarkAllCloexecAbove2();
    const bool ok = (::fcntl(a, F_GETFD) & FD_CLOEXEC) && (::fcntl(b, F_GETFD) & FD_CLOEXEC) &&
                    !(::fcntl(0, F_GETFD) & FD_CLOEXEC) && !(::fcntl(2, F_GETFD) & FD_CLOEXEC);
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("a child whose parent is already gone kills itself", "[child_setup]") {
  // RunChildSetup compares getppid() with the pid recorded before fork; a
  // mismatch means the death signal can never come.
  const pid_t pid = ::fork();
  if (pid == 0) {
    ChildSetupParams params;
    params.parent_pid = ::getppid() + 100000;  // "recorded" pid of a parent that is gone
    RunChildSetup(params);
    ::_exit(3);  // not reached
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
}

TEST_CASE("RunChildSetup leads a new group and resets the signal state", "[child_setup]") {
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::signal(SIGUSR1, SIG_IGN);
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR2);
    ::sigprocmask(SIG_BLOCK, &block, nullptr);
    ChildSetupParams params;
    params.parent_pid = ::getppid();
    params.stdout_fd = p[1];
    if (RunChildSetup(params) != 0) ::_exit(10);
    struct sigaction sa {};
    ::sigaction(SIGUSR1, nullptr, &sa);
    sigset_t mask;
    ::sigprocmask(SIG_SETMASK, nullptr, &mask);
    if (::getpgrp() != ::getpid()) ::_exit(11);
    if (sa.sa_handler != SIG_DFL) ::_exit(12);
    if (sigismember(&mask, SIGUSR2)) ::_exit(13);
    if (::write(1, "x", 1) != 1) ::_exit(14);  // stdout is the pipe now
    if (!(::fcntl(p[1], F_GETFD) & FD_CLOEXEC)) ::_exit(15);
    ::_exit(0);
  }
  ::close(p[1]);
  char c = 0;
  CHECK(::read(p[0], &c, 1) == 1);
  CHECK(c == 'x');
  ::close(p[0]);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  INFO("exit " << WEXITSTATUS(status)
               << " (11 group, 12 disposition, 13 mask, 14 stdout, 15 cloexec)");
  CHECK(WEXITSTATUS(status) == 0);
}

}  // namespace gculaunch::sys
