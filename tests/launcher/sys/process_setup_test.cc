#include "launcher/sys/process_setup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

namespace gculaunch::sys {

TEST_CASE("EnsureStdioOpen puts /dev/null on closed standard descriptors", "[process_setup]") {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(1);
    EnsureStdioOpen();
    const bool reopened = ::fcntl(1, F_GETFD) != -1;
    int fds[2];
    const bool pipe_above = ::pipe(fds) == 0 && fds[0] > 2 && fds[1] > 2;
    ::_exit(reopened && pipe_above ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("IgnoreSigpipe and SignalIgnored", "[process_setup]") {
  struct sigaction old {};
  ::sigaction(SIGPIPE, nullptr, &old);
  IgnoreSigpipe();
  CHECK(SignalIgnored(SIGPIPE));
  ::sigaction(SIGPIPE, &old, nullptr);
  CHECK_FALSE(SignalIgnored(SIGPIPE) != (old.sa_handler == SIG_IGN));
}

TEST_CASE("DefaultSigchld undoes an inherited SIG_IGN", "[process_setup]") {
  struct sigaction old {
  }, ignore{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGCHLD, &ignore, &old);
  CHECK(SignalIgnored(SIGCHLD));
  DefaultSigchld();
  CHECK_FALSE(SignalIgnored(SIGCHLD));
  ::sigaction(SIGCHLD, &old, nullptr);
}

TEST_CASE("HostName is known", "[process_setup]") { CHECK_FALSE(HostName().empty()); }

}  // namespace gculaunch::sys
