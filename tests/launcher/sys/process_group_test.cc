#include "launcher/sys/process_group.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

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

  CHECK(GroupAlive(leader));
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
  CHECK(GroupAlive(leader));

  // The group signal reaches the grandchild (re-parented by now).  Its
  // pidfd becomes readable when it has exited; a zombie left behind by a
  // parent that does not reap does not count as alive.
  const int fd = PidfdOpen(grandchild);
  REQUIRE(fd >= 0);
  CHECK(SignalGroup(leader, SIGKILL));
  pollfd p{fd, POLLIN, 0};
  REQUIRE(::poll(&p, 1, -1) == 1);
  ::close(fd);
  CHECK_FALSE(GroupAlive(leader));
}

TEST_CASE("SignalGroup refuses pgid 0, 1 and negatives", "[process_group]") {
  int err = 0;
  CHECK_FALSE(SignalGroup(0, 0, &err));
  CHECK(err == EINVAL);
  CHECK_FALSE(SignalGroup(1, 0, &err));
  CHECK_FALSE(SignalGroup(-5, 0, &err));
  CHECK_FALSE(GroupAlive(0));
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
