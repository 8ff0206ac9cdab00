#include "launcher/sys/thread_priority.h"

#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <string>
#include <thread>
#include <vector>

namespace gculaunch::sys {
namespace {

// A child with three threads, all parked; killed and reaped by the destructor.
struct ThreadedChild {
  ThreadedChild() {
    int ready[2];
    REQUIRE(::pipe(ready) == 0);
    pid = ::fork();
    if (pid == 0) {
      ::close(ready[0]);
      std::thread a([] { ::pause(); });
      std::thread b([] { ::pause(); });
      const char one = '1';
      if (::write(ready[1], &one, 1) != 1) ::_exit(1);
      for (;;) ::pause();
    }
    ::close(ready[1]);
    char got = 0;
    REQUIRE(::read(ready[0], &got, 1) == 1);
    ::close(ready[0]);
  }
  ~ThreadedChild() {
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
  pid_t pid = 0;
};

// The priority of every thread of `pid`, as the kernel reports it.
std::vector<Priority> ThreadsOf(pid_t pid) {
  std::vector<Priority> out;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* tasks = ::opendir(dir.c_str());
  if (tasks == nullptr) return out;
  while (const dirent* entry = ::readdir(tasks)) {
    if (entry->d_name[0] == '.') continue;
    const pid_t tid = static_cast<pid_t>(std::stol(entry->d_name));
    errno = 0;
    const int nice = ::getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
    out.push_back(Priority{nice, ::sched_getscheduler(tid) & ~SCHED_RESET_ON_FORK});
  }
  ::closedir(tasks);
  return out;
}

}  // namespace

TEST_CASE("thread priority: CapEff of a status text", "[thread_priority]") {
  auto caps = ParseCapEff("Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n");
  REQUIRE(caps.ok());
  CHECK(*caps == 0x1ffffffffffULL);
  auto nice_only = ParseCapEff("CapEff:\t0000000000800000");
  REQUIRE(nice_only.ok());
  CHECK(*nice_only == (1ULL << 23));
  CHECK(ParseCapEff("CapPrm:\t0\n").error().what ==
        "no hexadecimal CapEff line in the process's status");
  CHECK_FALSE(ParseCapEff("CapEff:\tzz\n").ok());
}

TEST_CASE("thread priority: who may raise a thread again", "[thread_priority]") {
  const std::uint64_t sys_nice = 1ULL << 23;
  // CAP_SYS_NICE: any value.
  CHECK(MayRaiseTo(sys_nice, 0, -20));
  // RLIMIT_NICE is a ceiling of 20 - nice: 20 allows nice 0, 10 allows nice 10 and above.
  CHECK(MayRaiseTo(0, 20, 0));
  CHECK_FALSE(MayRaiseTo(0, 19, 0));
  CHECK(MayRaiseTo(0, 10, 10));
  CHECK_FALSE(MayRaiseTo(0, 10, 9));
  CHECK_FALSE(MayRaiseTo(0, 0, 19));  // the default limit: no raise at all
  CHECK(MayRaiseTo(0, RLIM_INFINITY, -20));
  CHECK_FALSE(MayRaiseTo(1ULL << 22, 0, 0));  // another capability
}

TEST_CASE("thread priority: every thread of a process is set and read back", "[thread_priority]") {
  auto own = OwnPriority();
  REQUIRE(own.ok());
  REQUIRE(IsTimeSharing(own->policy));
  CHECK(Describe(Priority{10, SCHED_IDLE}) == "nice 10, SCHED_IDLE");
  ThreadedChild child;
  // Lowering is always allowed: nice +5 under SCHED_IDLE, on all three threads.
  const Priority low{own->nice + 5, SCHED_IDLE};
  REQUIRE(SetEveryThread(child.pid, low).ok());
  const auto lowered = ThreadsOf(child.pid);
  CHECK(lowered.size() == 3);
  for (const Priority& p : lowered) CHECK(p == low);
  // Raising it back needs the right to; where this test runs without it, the error says so.
  auto may = MayRaiseOwnTo(own->nice);
  REQUIRE(may.ok());
  const Status raised = SetEveryThread(child.pid, *own);
  CHECK(raised.ok() == *may);
  if (raised.ok()) {
    for (const Priority& p : ThreadsOf(child.pid)) CHECK(p == *own);
  } else {
    CHECK(raised.error().what.find("thread ") == 0);
  }
  CHECK(SetEveryThread(-1, *own).error().what.find("cannot list /proc/-1/task") == 0);
}

}  // namespace gculaunch::sys
