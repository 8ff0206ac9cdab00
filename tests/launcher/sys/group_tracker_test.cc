#include "launcher/sys/group_tracker.h"

#include <signal.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/test_util.h"

namespace gculaunch::sys {
namespace {

SpawnRequest Child(std::vector<std::string> steps) {
  SpawnRequest request;
  request.program = testing::TestChild();
  request.argv = {"test_child"};
  request.argv.insert(request.argv.end(), steps.begin(), steps.end());
  request.env = {"PATH=/usr/bin:/bin"};
  return request;
}

// Looks at the groups every 10 ms (no event tells when a grandchild is gone) until `done`.
bool LookUntil(boost::asio::io_context& io, GroupTracker& groups,
               const std::function<bool()>& done) {
  boost::asio::steady_timer timer(io);
  std::function<void()> arm = [&] {
    timer.expires_after(std::chrono::milliseconds(10));
    timer.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      REQUIRE(groups.ReleaseEmpty().ok());
      arm();
    });
  };
  arm();
  const bool ok = testing::RunUntil(io, done);
  timer.cancel();
  io.poll();
  return ok;
}

struct Fixture {
  boost::asio::io_context io;
  Spawner spawner;
  ChildWatcher watcher{io, false};
};

}  // namespace

TEST_CASE("group tracker: an exited leader is released once its group is empty",
          "[group_tracker]") {
  Fixture f;
  GroupTracker groups(f.spawner, f.watcher, nullptr);
  std::optional<WorkerExit> exit;
  auto pid = groups.Spawn(Child({"exit", "3"}), [&](pid_t, WorkerExit e) { exit = e; });
  REQUIRE(pid.ok());
  CHECK(groups.Holds(*pid));
  REQUIRE(testing::RunUntil(f.io, [&] { return exit.has_value(); }));
  CHECK(exit->Describe() == "exit code 3");
  CHECK(groups.Exited(*pid));
  CHECK(groups.Holds(*pid));  // the zombie pins the number until someone looks
  CHECK(f.watcher.unreleased() == 1);
  REQUIRE(groups.ReleaseEmpty().ok());
  CHECK_FALSE(groups.Holds(*pid));
  CHECK(groups.held() == 0);
  CHECK(f.watcher.unreleased() == 0);
  CHECK_FALSE(groups.Signal(*pid, SIGKILL));  // released: never signalled again
}

TEST_CASE("group tracker: a grandchild keeps its group until it is gone", "[group_tracker]") {
  Fixture f;
  testing::TempDir dir;
  GroupTracker groups(f.spawner, f.watcher, nullptr);
  bool exited = false;
  auto pid = groups.Spawn(Child({"grandchild", dir.File("gc"), "exit", "0"}),
                          [&](pid_t, WorkerExit) { exited = true; });
  REQUIRE(pid.ok());
  REQUIRE(testing::RunUntil(f.io, [&] { return exited; }));
  REQUIRE(groups.ReleaseEmpty().ok());
  CHECK(groups.Holds(*pid));  // the grandchild is still in it
  CHECK(groups.Held() == std::vector<pid_t>{*pid});
  CHECK(groups.Signal(*pid, SIGKILL));
  CHECK(LookUntil(f.io, groups, [&] { return groups.held() == 0; }));
}

TEST_CASE("group tracker: an abandoned group is killed, unheard, and released", "[group_tracker]") {
  Fixture f;
  GroupTracker groups(f.spawner, f.watcher, nullptr);
  bool heard = false;
  auto pid = groups.Spawn(Child({"pause"}), [&](pid_t, WorkerExit) { heard = true; });
  REQUIRE(pid.ok());
  groups.Abandon(*pid);
  CHECK(groups.abandoned() == 1);
  CHECK(LookUntil(f.io, groups, [&] { return groups.held() == 0; }));
  CHECK_FALSE(heard);
  CHECK(groups.abandoned() == 0);
  CHECK(f.watcher.unreleased() == 0);
}

TEST_CASE("group tracker: a handed-over group reports to its new owner", "[group_tracker]") {
  Fixture f;
  GroupTracker pool(f.spawner, f.watcher, nullptr);
  GroupTracker attempt(f.spawner, f.watcher, nullptr);
  bool old_heard = false;
  std::optional<WorkerExit> new_heard;
  auto pid = pool.Spawn(Child({"pause"}), [&](pid_t, WorkerExit) { old_heard = true; });
  REQUIRE(pid.ok());
  pool.HandOver(*pid, attempt, [&](pid_t, WorkerExit e) { new_heard = e; });
  CHECK_FALSE(pool.Holds(*pid));
  CHECK(attempt.Holds(*pid));
  CHECK_FALSE(pool.Signal(*pid, SIGTERM));  // not the pool's any more
  CHECK(attempt.Signal(*pid, SIGTERM));
  REQUIRE(testing::RunUntil(f.io, [&] { return new_heard.has_value(); }));
  CHECK_FALSE(old_heard);
  CHECK(new_heard->Describe() == "signal 15 (SIGTERM)");
  REQUIRE(attempt.ReleaseEmpty().ok());
  CHECK(attempt.held() == 0);
}

}  // namespace gculaunch::sys
