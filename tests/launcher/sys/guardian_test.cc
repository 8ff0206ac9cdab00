#include "launcher/sys/guardian.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

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
  guardian->GroupStarted(leader, ProcessStartTime(leader));
  guardian->GroupStarted(other, ProcessStartTime(other));
  guardian->GroupGone(other);  // confirmed empty (pretend): must be left alone
  CHECK(guardian->Abandon());  // as if gculaunch had been SIGKILLed
  CHECK(guardian->replacements() == 0);

  int status = 0;
  REQUIRE(::waitpid(leader, &status, 0) == leader);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  WaitGone(grandchild);
  CHECK_FALSE(GroupAliveForTest(leader));

  // The group the guardian was told about as gone is untouched.
  CHECK(GroupAliveForTest(other));
  SignalGroup(other, SIGKILL);
  REQUIRE(::waitpid(other, &status, 0) == other);
  WaitGone(other_grandchild);
}

TEST_CASE("guardian leaves groups alone after 'done'", "[guardian]") {
  auto guardian = Guardian::Start();
  REQUIRE(guardian.ok());
  auto [leader, grandchild] = StartGroup();
  guardian->GroupStarted(leader, ProcessStartTime(leader));
  guardian->Done();  // reaps the guardian: it has exited when this returns
  CHECK(GroupAliveForTest(leader));
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
  guardian->GroupStarted(leader, ProcessStartTime(leader));
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

TEST_CASE("guardian: its own binary with a short argv and no environment", "[guardian]") {
  auto guardian = Guardian::Start();
  REQUIRE(guardian.ok());
  const std::string proc = "/proc/" + std::to_string(guardian->pid());
  // Executed, not just forked: wait until the exec is visible.
  std::string cmdline;
  for (int i = 0; i < 500 && cmdline.find("--gculaunch-guardian") == std::string::npos; ++i) {
    cmdline = testing::ReadFile(proc + "/cmdline");
    if (cmdline.find("--gculaunch-guardian") == std::string::npos) ::usleep(2000);
  }
  CHECK(cmdline == std::string("gculaunch-guard\0--gculaunch-guardian\0", 37));
  CHECK(testing::ReadFile(proc + "/environ").empty());
  CHECK(guardian->Done());
}

TEST_CASE("guardian leaves a group alone whose number belongs to another process now",
          "[guardian]") {
  testing::TempDir dir;
  const std::string log = dir.File("guardian.log");
  // The guardian writes its lines to the stderr it was started with.
  const int saved = ::dup(2);
  const int file = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  REQUIRE(file >= 0);
  ::dup2(file, 2);
  auto guardian = Guardian::Start();
  ::dup2(saved, 2);
  ::close(saved);
  ::close(file);
  REQUIRE(guardian.ok());
  auto [stranger, stranger_child] = StartGroup();
  auto [rank, rank_child] = StartGroup();
  // As if the rank that had this number was reaped and the number went to `stranger`.
  guardian->GroupStarted(stranger, ProcessStartTime(stranger) + 1);
  guardian->GroupStarted(rank, ProcessStartTime(rank));
  REQUIRE(guardian->Abandon());

  int status = 0;
  REQUIRE(::waitpid(rank, &status, 0) == rank);
  CHECK(WTERMSIG(status) == SIGKILL);
  WaitGone(rank_child);
  CHECK(GroupAliveForTest(stranger));  // untouched
  CHECK(testing::ReadFile(log).find("left process group " + std::to_string(stranger) + " alone") !=
        std::string::npos);
  SignalGroup(stranger, SIGKILL);
  REQUIRE(::waitpid(stranger, &status, 0) == stranger);
  WaitGone(stranger_child);
}

TEST_CASE("a killed guardian is replaced and the new one is given every live group", "[guardian]") {
  testing::TempDir dir;
  const std::string scratch = dir.File("scratch");
  std::filesystem::create_directories(scratch);
  std::vector<std::string> lines;
  GuardianOptions options;
  options.reporter = [&](const std::string& line) { lines.push_back(line); };
  auto guardian = Guardian::Start(options);
  REQUIRE(guardian.ok());
  auto [leader, grandchild] = StartGroup();
  guardian->GroupStarted(leader, ProcessStartTime(leader));
  guardian->RemoveAtExit(scratch);
  const pid_t first = guardian->pid();
  REQUIRE(::kill(first, SIGKILL) == 0);
  for (int i = 0; i < 1000 && guardian->replacements() == 0; ++i) {
    REQUIRE(guardian->Maintain());
    ::usleep(2000);
  }
  REQUIRE(guardian->replacements() == 1);
  CHECK(guardian->pid() != first);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("was killed by SIGKILL") != std::string::npos);
  CHECK(lines[0].find("started a new one") != std::string::npos);
  CHECK(GroupAliveForTest(leader));  // losing a guardian kills nothing

  REQUIRE(guardian->Abandon());  // the new guardian knows the group and the directory
  int status = 0;
  REQUIRE(::waitpid(leader, &status, 0) == leader);
  CHECK(WTERMSIG(status) == SIGKILL);
  WaitGone(grandchild);
  CHECK_FALSE(std::filesystem::exists(scratch));
}

TEST_CASE("a guardian that stops reading is replaced, and no message is dropped", "[guardian]") {
  std::vector<std::string> lines;
  GuardianOptions options;
  options.max_queue = 4096;
  options.reporter = [&](const std::string& line) { lines.push_back(line); };
  auto guardian = Guardian::Start(options);
  REQUIRE(guardian.ok());
  auto [leader, grandchild] = StartGroup();
  guardian->GroupStarted(leader, ProcessStartTime(leader));
  const pid_t stopped = guardian->pid();
  REQUIRE(::kill(stopped, SIGSTOP) == 0);
  // More than a pipe holds: queued first, then the guardian is declared stuck.
  for (int i = 0; i < 20000 && guardian->replacements() == 0; ++i) {
    guardian->GroupGone(100000 + i);
  }
  REQUIRE(guardian->replacements() == 1);
  CHECK(guardian->pid() != stopped);
  CHECK_FALSE(testing::ProcessAlive(stopped));  // killed and reaped
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("did not read its messages") != std::string::npos);

  REQUIRE(guardian->Abandon());
  int status = 0;
  REQUIRE(::waitpid(leader, &status, 0) == leader);
  CHECK(WTERMSIG(status) == SIGKILL);
  WaitGone(grandchild);
}

}  // namespace gculaunch::sys
