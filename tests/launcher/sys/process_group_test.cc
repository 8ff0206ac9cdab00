#include "launcher/sys/process_group.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <set>

#include "launcher/sys/child_watcher.h"

namespace gculaunch::sys {

TEST_CASE("a process group is alive while it has a non-zombie member", "[process_group]") {
  int ready[2];
  REQUIRE(::pipe2(ready, O_CLOEXEC) == 0);
  const pid_t leader = ::fork();
  if (leader == 0) {
    ::setpgid(0, 0);
    const pid_t grandchild = ::fork();  // stays in the same group
    if (grandchild == 0) {
      for (;;) ::pause();
    }
    if (::write(ready[1], &grandchild, sizeof grandchild) != sizeof grandchild) ::_exit(1);
    for (;;) ::pause();
  }
  ::setpgid(leader, leader);  // avoid racing the child's own setpgid
  ::close(ready[1]);
  pid_t grandchild = -1;
  REQUIRE(::read(ready[0], &grandchild, sizeof grandchild) == sizeof grandchild);
  ::close(ready[0]);

  CHECK(GroupAliveForTest(leader));
  const auto members = GroupMembers(leader);
  CHECK(members.size() == 2);
  for (const ProcInfo& info : members) {
    CHECK(info.pgid == leader);
    CHECK(info.Describe().find("pid " + std::to_string(info.pid)) == 0);
  }

  // Killing the leader alone leaves the grandchild: the group stays alive.
  REQUIRE(SignalProcess(leader, SIGKILL));
  int status = 0;
  REQUIRE(::waitpid(leader, &status, 0) == leader);
  CHECK(GroupAliveForTest(leader));

  // The group signal reaches the grandchild (re-parented by now).  Its
  // pidfd becomes readable when it has exited; a zombie left behind by a
  // parent that does not reap does not count as alive.
  const int fd = PidfdOpen(grandchild);
  REQUIRE(fd >= 0);
  CHECK(SignalGroup(leader, SIGKILL));
  pollfd p{fd, POLLIN, 0};
  REQUIRE(::poll(&p, 1, -1) == 1);
  ::close(fd);
  CHECK_FALSE(GroupAliveForTest(leader));
}

TEST_CASE("LiveGroups answers for many groups at once, an unreaped leader does not count",
          "[process_group]") {
  const pid_t pausing = ::fork();
  if (pausing == 0) {
    ::setpgid(0, 0);
    for (;;) ::pause();
  }
  ::setpgid(pausing, pausing);
  const pid_t exited = ::fork();
  if (exited == 0) {
    ::setpgid(0, 0);
    ::_exit(0);
  }
  ::setpgid(exited, exited);
  // Its exit read without reaping: a zombie that keeps the number.
  siginfo_t info{};
  REQUIRE(::waitid(P_PID, static_cast<id_t>(exited), &info, WEXITED | WNOWAIT) == 0);
  CHECK(ProcessStartTime(exited) != 0);
  CHECK(ProcessStartTime(pausing) != 0);

  auto live = LiveGroups({pausing, exited, 999999999});
  REQUIRE(live.ok());
  CHECK(*live == std::set<pid_t>{pausing});
  CHECK(GroupAliveForTest(pausing));
  CHECK_FALSE(GroupAliveForTest(exited));

  REQUIRE(SignalGroup(pausing, SIGKILL));
  REQUIRE(::waitpid(pausing, nullptr, 0) == pausing);
  REQUIRE(::waitpid(exited, nullptr, 0) == exited);
  CHECK(ProcessStartTime(exited) == 0);
}

namespace {

// Opens /dev/null until the descriptor table is full.
void FillDescriptorTable() {
  while (::open("/dev/null", O_RDONLY) >= 0) {
  }
}

// In a forked child (the limit and the table are its own): 0 when "cannot look" is an
// error, never "empty", and the reserve makes the look possible.  Other codes name the
// step that went wrong.
int CheckScanWithoutDescriptors() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 10;
  limit.rlim_cur = 64;
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) return 11;
  const std::set<pid_t> mine{::getpgrp()};  // certainly alive: this process is in it

  ReserveDescriptors(4);
  FillDescriptorTable();
  auto with_reserve = LiveGroups(mine);
  if (!with_reserve.ok()) return 12;
  if (*with_reserve != mine) return 13;
  auto again = LiveGroups(mine);  // the reserve was taken back after the first look
  if (!again.ok() || *again != mine) return 14;

  ReserveDescriptors(0);
  FillDescriptorTable();
  auto without = LiveGroups(mine);
  if (without.ok()) return 15;  // "empty" or a guess: wrong either way
  if (without.error().what.find("Too many open files") == std::string::npos) return 16;
  if (!GroupAliveForTest(::getpgrp())) return 17;  // cannot tell counts as alive
  return 0;
}

}  // namespace

TEST_CASE("a /proc scan without descriptors fails instead of saying 'empty', the reserve helps",
          "[process_group]") {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(CheckScanWithoutDescriptors());
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("SignalGroup refuses pgid 0, 1 and negatives", "[process_group]") {
  int err = 0;
  CHECK_FALSE(SignalGroup(0, 0, &err));
  CHECK(err == EINVAL);
  CHECK_FALSE(SignalGroup(1, 0, &err));
  CHECK_FALSE(SignalGroup(-5, 0, &err));
  CHECK_FALSE(GroupAliveForTest(0));
}

TEST_CASE("ReadProcInfo describes this process", "[process_group]") {
  ProcInfo info;
  REQUIRE(ReadProcInfo(::getpid(), &info));
  CHECK(info.pid == ::getpid());
  CHECK(info.pgid == ::getpgrp());
  CHECK(info.state == 'R');
  CHECK(ProcStateName('D').find("uninterruptible") != std::string::npos);
  CHECK_FALSE(ReadProcInfo(0, &info));
}

}  // namespace gculaunch::sys
