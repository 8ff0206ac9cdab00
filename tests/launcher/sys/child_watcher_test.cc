#include "launcher/sys/child_watcher.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <cerrno>
#include <map>
#include <optional>

#include "launcher/sys/process_group.h"
#include "tests/support/test_util.h"

namespace gculaunch::sys {
namespace {

pid_t ForkExiting(int code) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(code);
  return pid;
}

pid_t ForkPausing() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (;;) ::pause();
  }
  return pid;
}

// Watches children that exit in different ways and checks each reported exit.
void CheckExitsAreReported(bool force_sigchld) {
  boost::asio::io_context io;
  ChildWatcher watcher(io, force_sigchld);
  std::map<pid_t, WorkerExit> seen;
  auto record = [&](pid_t pid, WorkerExit exit) { seen.emplace(pid, exit); };

  const pid_t a = ForkExiting(7);
  const pid_t b = ForkExiting(0);
  const pid_t c = ForkPausing();
  watcher.Watch(a, record);
  watcher.Watch(b, record);
  watcher.Watch(c, record);
  REQUIRE(watcher.watched() == 3);
  REQUIRE(::kill(c, SIGKILL) == 0);  // uncatchable: the fork still has Catch's handlers

  REQUIRE(testing::RunUntil(io, [&] { return seen.size() == 3; }));
  CHECK(seen.at(a) == WorkerExit::Exited(7));
  CHECK(seen.at(b) == WorkerExit::Exited(0));
  CHECK(seen.at(c) == WorkerExit::Signaled(SIGKILL));
  CHECK(watcher.watched() == 0);
  // Reported, not reaped: each is still our zombie, so its number cannot go to another
  // process, until the owner releases it.
  CHECK(watcher.unreleased() == 3);
  for (pid_t pid : {a, b, c}) {
    ProcInfo info;
    REQUIRE(ReadProcInfo(pid, &info));
    CHECK(info.state == 'Z');
    watcher.Release(pid);
    errno = 0;
    CHECK(::waitpid(pid, nullptr, WNOHANG) == -1);
    CHECK(errno == ECHILD);
  }
  CHECK(watcher.unreleased() == 0);
}

}  // namespace

TEST_CASE("child watcher picks pidfd when the kernel has it", "[child_watcher]") {
  boost::asio::io_context io;
  ChildWatcher watcher(io, /*force_sigchld=*/false);
  const int fd = PidfdOpen(::getpid());
  const bool kernel_has_pidfd = fd >= 0;
  if (fd >= 0) ::close(fd);
  CHECK((watcher.mode() == ChildWatcher::Mode::kPidfd) == kernel_has_pidfd);
  CHECK(watcher.fallback_reason().empty() == kernel_has_pidfd);
}

TEST_CASE("child watcher reports exits through pidfd (or the kernel's only way)",
          "[child_watcher]") {
  CheckExitsAreReported(false);
}

TEST_CASE("child watcher reports exits through SIGCHLD when forced", "[child_watcher]") {
  boost::asio::io_context io;
  {
    ChildWatcher watcher(io, true);
    CHECK(watcher.mode() == ChildWatcher::Mode::kSigchld);
    CHECK(watcher.fallback_reason() == "forced");
  }
  CheckExitsAreReported(true);
}

TEST_CASE("child watcher catches a child that exited before it was watched (SIGCHLD)",
          "[child_watcher]") {
  boost::asio::io_context io;
  const pid_t pid = ForkExiting(3);
  // Make sure it is a zombie before anybody catches SIGCHLD.
  siginfo_t info{};
  REQUIRE(::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) == 0);
  ChildWatcher watcher(io, true);
  std::optional<WorkerExit> exit_seen;
  watcher.Watch(pid, [&](pid_t, WorkerExit e) { exit_seen = e; });
  REQUIRE(testing::RunUntil(io, [&] { return exit_seen.has_value(); }));
  CHECK(*exit_seen == WorkerExit::Exited(3));
  watcher.Release(pid);
}

TEST_CASE("child watcher falls back to SIGCHLD at run time when pidfd_open is blocked",
          "[child_watcher]") {
  // The check runs in a forked child that installs a seccomp filter making
  // pidfd_open fail (ENOSYS, then EPERM as some container profiles do), and
  // reports through distinct exit codes.
  for (int err : {ENOSYS, EPERM}) {
    const pid_t checker = ::fork();
    if (checker == 0) {
      if (!testing::DisablePidfdOpen(err)) ::_exit(10);
      boost::asio::io_context io;
      ChildWatcher watcher(io, false);
      if (watcher.mode() != ChildWatcher::Mode::kSigchld) ::_exit(11);
      if (watcher.fallback_reason().find("pidfd_open") == std::string::npos) ::_exit(12);
      std::optional<WorkerExit> exit_seen;
      const pid_t pid = ForkExiting(9);
      watcher.Watch(pid, [&](pid_t, WorkerExit e) { exit_seen = e; });
      if (!testing::RunUntil(io, [&] { return exit_seen.has_value(); })) ::_exit(13);
      if (!(*exit_seen == WorkerExit::Exited(9))) ::_exit(14);
      ::_exit(0);
    }
    int status = 0;
    REQUIRE(::waitpid(checker, &status, 0) == checker);
    INFO("errno " << err << ": checker exit " << WEXITSTATUS(status)
                  << " (10 seccomp refused, 11 wrong mode, 12 reason, 13 no exit seen, "
                     "14 wrong exit)");
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
}

}  // namespace gculaunch::sys
