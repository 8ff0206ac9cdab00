#include "launcher/sys/guardian.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>

#include "launcher/sys/child_watcher.h"
#include "launcher/sys/process_group.h"
#include "tests/support/test_util.h"

namespace gculaunch::sys {
namespace {

// A process group of a leader and a grandchild, both pausing.  Returns the
// leader's pid (== pgid) and the grandchild's pid.
std::pair<pid_t, pid_t> StartGroup() {
  int ready[2];
  REQUIRE(::pipe2(ready, O_CLOEXEC) == 0);
  const pid_t leader = ::fork();
  if (leader == 0) {
    // These processes never exec, so they must drop inherited descriptors by
    // hand: a copy of the guardian's pipe would hide gculaunch's "death".
    ::setpgid(0, 0);
    const pid_t grandchild = ::fork();
    if (grandchild == 0) {
      ::syscall(SYS_close_range, 3U, ~0U, 0U);
      for (;;) ::pause();
    }
    if (::write(ready[1], &grandchild, sizeof grandchild) != sizeof grandchild) ::_exit(1);
    ::syscall(SYS_close_range, 3U, ~0U, 0U);
    for (;;) ::pause();
  }
  ::setpgid(leader, leader);
  ::close(ready[1]);
  pid_t grandchild = -1;
  REQUIRE(::read(ready[0], &grandchild, sizeof grandchild) == sizeof grandchild);
  ::close(ready[0]);
  return {leader, grandchild};
}

void WaitGone(pid_t pid) {
  const int fd = PidfdOpen(pid);
  if (fd < 0) return;  // already gone
  pollfd p{fd, POLLIN, 0};
  REQUIRE(::poll(&p, 1, -1) == 1);
  ::close(fd);
}

}  // namespace

TEST_CASE("guardian kills recorded groups when gculaunch goes away without 'done'", "[guardian]") {
  auto guardian = Guardian::Start();
  REQUIRE(guardian.ok());
  CHECK(guardian->pid() > 0);
  auto [leader, grandchild] = StartGroup();
  auto [other, other_grandchild] = StartGroup();
  guardian->GroupStarted(leader);
  guardian->GroupStarted(other);
  guardian->GroupGone(other);  // confirmed empty (pretend): must be left alone
  guardian->Abandon();         // as if gculaunch had been SIGKILLed
  CHECK(guardian->healthy());

  int status = 0;
  REQUIRE(::waitpid(leader, &status, 0) == leader);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  WaitGone(grandchild);
  CHECK_FALSE(GroupAlive(leader));

  // The group the guardian was told about as gone is untouched.
  CHECK(GroupAlive(other));
  SignalGroup(other, SIGKILL);
  REQUIRE(::waitpid(other, &status, 0) == other);
  WaitGone(other_grandchild);
}

TEST_CASE("guardian leaves groups alone after 'done'", "[guardian]") {
  auto guardian = Guardian::Start();
  REQUIRE(guardian.ok());
  auto [leader, grandchild] = StartGroup();
  guardian->GroupStarted(leader);
  guardian->Done();  // reaps the guardian: it has exited when this returns
  CHECK(GroupAlive(leader));
  CHECK(testing::ProcessAlive(grandchild));
  SignalGroup(leader, SIGKILL);
  int status = 0;
  REQUIRE(::waitpid(leader, &status, 0) == leader);
  WaitGone(grandchild);
}

TEST_CASE("guardian removes the scratch directory on both ways out", "[guardian]") {
  for (bool clean : {true, false}) {
    testing::TempDir dir;
    const std::string scratch = dir.File("scratch");
    std::filesystem::create_directories(scratch + "/attempt_0/3");
    testing::WriteFile(scratch + "/attempt_0/3/error.json", "{}");
    auto guardian = Guardian::Start();
    REQUIRE(guardian.ok());
    guardian->RemoveAtExit(scratch);
    const pid_t pid = guardian->pid();
    // Both reap: the removal is over, and the guardian gone, when they return.
    CHECK((clean ? guardian->Done() : guardian->Abandon()));
    CHECK_FALSE(std::filesystem::exists(scratch));
    CHECK(guardian->pid() == -1);
    CHECK(::waitpid(pid, nullptr, WNOHANG) < 0);  // already reaped: not our child any more
  }
}

TEST_CASE("guardian removes the files it was given (the control socket) on both ways out",
          "[guardian]") {
  for (bool clean : {true, false}) {
    testing::TempDir dir;
    const std::string first = dir.Write("a.sock", "x");
    const std::string second = dir.Write("b.sock", "y");
    const std::string kept = dir.Write("c.sock", "z");
    auto guardian = Guardian::Start();
    REQUIRE(guardian.ok());
    guardian->UnlinkAtExit(first);
    guardian->UnlinkAtExit(second);
    CHECK((clean ? guardian->Done() : guardian->Abandon()));
    CHECK_FALSE(std::filesystem::exists(first));
    CHECK_FALSE(std::filesystem::exists(second));
    CHECK(std::filesystem::exists(kept));
  }
}

TEST_CASE("guardian: the wait for it is bounded", "[guardian]") {
  auto guardian = Guardian::Start();
  REQUIRE(guardian.ok());
  const pid_t pid = guardian->pid();
  REQUIRE(::kill(pid, SIGSTOP) == 0);  // a guardian that cannot finish in time
  const auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(guardian->Done(std::chrono::milliseconds(100)));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(3));
  CHECK(guardian->pid() == pid);
  REQUIRE(::kill(pid, SIGCONT) == 0);
  CHECK(guardian->Abandon());  // it finishes once it runs again
  CHECK(guardian->pid() == -1);
}

TEST_CASE("guardian ignores the signals that stop gculaunch", "[guardian]") {
  auto guardian = Guardian::Start();
  REQUIRE(guardian.ok());
  auto [leader, grandchild] = StartGroup();
  guardian->GroupStarted(leader);
  // The guardian's own group: a kill aimed at the test's group misses it.
  ProcInfo info;
  REQUIRE(ReadProcInfo(guardian->pid(), &info));
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) {
    REQUIRE(::kill(guardian->pid(), sig) == 0);
  }
  // Still alive and still doing its job.
  CHECK(testing::ProcessAlive(guardian->pid()));
  guardian->Abandon();
  int status = 0;
  REQUIRE(::waitpid(leader, &status, 0) == leader);
  CHECK(WTERMSIG(status) == SIGKILL);
  WaitGone(grandchild);
}

}  // namespace gculaunch::sys
