#include "launcher/sys/process_group.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

namespace gculaunch::sys {

TEST_CASE("a process group is alive while it has a non-zombie member", "[process_group]") {
  int ready[2];
  REQUIRE(::pipe2(ready, O_CLOEXEC) == 0);
  const pid_t leader = ::fork();
  if (leader == 0) {
    ::setpgid(0, 0);
    if (::fork() == 0) {  // grandchild in the same group
      ::close(ready[1]);
      for (;;) ::pause();
    }
    ::close(ready[1]);  // the group is complete
    for (;;) ::pause();
  }
  ::setpgid(leader, leader);  // avoid racing the child's own setpgid
  ::close(ready[1]);
  char byte;
  while (::read(ready[0], &byte, 1) > 0) {
  }
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

  // The group signal reaches the grandchild.  It is re-parented to init (or a
  // subreaper), which reaps it; a zombie would not count as alive anyway.
  CHECK(SignalGroup(leader, SIGKILL));
  for (int i = 0; i < 100000 && GroupAlive(leader); ++i) {
    ::sched_yield();
  }
  CHECK_FALSE(GroupAlive(leader));
  int err = 0;
  // Empty now (or only a zombie): ESRCH, or delivered to a zombie.
  if (!SignalGroup(leader, 0, &err)) CHECK(err == ESRCH);
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
