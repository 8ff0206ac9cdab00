#include "launcher/ops/file_timer.h"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <vector>

#include "tests/support/test_util.h"

namespace gculaunch {
namespace {

FileTimerRequest Timer(pid_t pid, const std::string& scope, double expiration, int sig) {
  FileTimerRequest r;
  r.pid = pid;
  r.scope_id = scope;
  r.expiration_time = expiration;
  r.signal = sig;
  return r;
}

}  // namespace

TEST_CASE("file timer: requests as torch's FileTimerClient writes them", "[file_timer]") {
  auto r = ParseFileTimerRequest(
      R"({"version": 1, "pid": 4242, "scope_id": "step", "expiration_time": 1700000000.5, )"
      R"("signal": 9})");
  REQUIRE(r);
  CHECK(r->pid == 4242);
  CHECK(r->scope_id == "step");
  CHECK(r->expiration_time == 1700000000.5);
  CHECK(r->signal == 9);
  auto release = ParseFileTimerRequest(
      R"({"version": 1, "pid": 7, "scope_id": "s", "expiration_time": -1, "signal": 0})");
  REQUIRE(release);
  CHECK(release->expiration_time == -1);
  for (const char* bad :
       {"", "not json", "[]", R"({"pid": 1, "scope_id": "s", "expiration_time": 1})",
        R"({"pid": "1", "scope_id": "s", "expiration_time": 1, "signal": 9})",
        R"({"pid": 0, "scope_id": "s", "expiration_time": 1, "signal": 9})",
        R"({"pid": 1, "scope_id": 3, "expiration_time": 1, "signal": 9})",
        R"({"pid": 1, "scope_id": "s", "expiration_time": 1, "signal": 99})"}) {
    INFO(bad);
    CHECK_FALSE(ParseFileTimerRequest(bad));
  }
}

TEST_CASE("file timer: the table", "[file_timer]") {
  FileTimerTable table;
  table.Apply(Timer(10, "a", 100, 9));
  table.Apply(Timer(10, "b", 90, 15));
  table.Apply(Timer(11, "a", 100, 9));
  table.Apply(Timer(11, "a", -1, 0));  // released
  table.Apply(Timer(12, "a", 50, 0));  // no signal: expires, not reaped
  table.Apply(Timer(13, "a", 200, 9));
  CHECK(table.size() == 4);
  CHECK(table.TakeExpired(80).empty());
  CHECK(table.size() == 3);  // pid 12's timer expired (and is gone) without a signal
  const auto expired = table.TakeExpired(150);
  REQUIRE(expired.size() == 1);
  CHECK(expired.at(10).scope_id == "b");  // the earliest expired timer with a signal
  CHECK(expired.at(10).signal == 15);
  CHECK(table.size() == 1);             // every timer of pid 10 is gone; pid 13's remains
  table.Apply(Timer(13, "a", 300, 9));  // renewed
  CHECK(table.TakeExpired(250).empty());
}

TEST_CASE("file timer: the table holds at most kMaxTimers, renewals and releases still apply",
          "[file_timer]") {
  FileTimerTable table;
  for (size_t i = 0; i < FileTimerTable::kMaxTimers; ++i) {
    REQUIRE(table.Apply(Timer(10, "scope" + std::to_string(i), 100, 9)));
  }
  CHECK_FALSE(table.Apply(Timer(10, "one-more", 100, 9)));
  CHECK_FALSE(table.Apply(Timer(11, "a", 50, 9)));
  CHECK(table.size() == FileTimerTable::kMaxTimers);
  CHECK(table.Apply(Timer(10, "scope0", 40, 15)));  // a renewal needs no new slot
  CHECK(table.Apply(Timer(10, "scope1", -1, 0)));   // a release frees one
  CHECK(table.Apply(Timer(11, "a", 50, 9)));
  const auto expired = table.TakeExpired(45);
  REQUIRE(expired.size() == 1);
  CHECK(expired.at(10).scope_id == "scope0");
  CHECK(expired.at(10).signal == 15);
}

TEST_CASE("file timer: served on a real FIFO", "[file_timer]") {
  testing::TempDir tmp;
  const std::string path = tmp.path() + "/watchdog_timer";
  boost::asio::io_context io;
  std::vector<FileTimerRequest> reaped;
  auto server =
      FileTimerServer::Start(io, path, [&](const FileTimerRequest& r) { reaped.push_back(r); });
  REQUIRE(server.ok());
  // As FileTimerClient: open write-only, non-blocking, one line per request.
  const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  REQUIRE(fd >= 0);
  const std::string lines =
      R"({"version": 1, "pid": 77, "scope_id": "late", "expiration_time": 1.0, "signal": 9})"
      "\n"
      R"({"version": 1, "pid": 78, "scope_id": "fine", "expiration_time": 4e9, "signal": 9})"
      "\n";
  REQUIRE(::write(fd, lines.data(), lines.size()) == static_cast<ssize_t>(lines.size()));
  ::close(fd);
  for (int i = 0; i < 100 && reaped.empty(); ++i) io.run_for(std::chrono::milliseconds(20));
  REQUIRE(reaped.size() == 1);
  CHECK(reaped[0].pid == 77);
  CHECK(reaped[0].scope_id == "late");
  CHECK((*server)->table().size() == 1);
  server->reset();
  CHECK(::access(path.c_str(), F_OK) != 0);  // the FIFO is removed with the server
}

TEST_CASE("file timer: a path that is not a FIFO of this user is left alone", "[file_timer]") {
  testing::TempDir tmp;
  boost::asio::io_context io;
  const auto reaper = [](const FileTimerRequest&) {};
  SECTION("a regular file (a mistyped TORCHELASTIC_TIMER_FILE) is not deleted") {
    const std::string path = tmp.Write("train.py", "precious\n");
    auto server = FileTimerServer::Start(io, path, reaper);
    REQUIRE_FALSE(server.ok());
    CHECK(server.error().what == "TORCHELASTIC_TIMER_FILE '" + path +
                                     "' is a regular file, not a FIFO of this user: gculaunch "
                                     "leaves it alone");
    CHECK(testing::ReadFile(path) == "precious\n");
  }
  SECTION("a symbolic link is not followed nor removed") {
    const std::string target = tmp.Write("target", "x");
    const std::string path = tmp.File("watchdog_timer");
    std::filesystem::create_symlink(target, path);
    auto server = FileTimerServer::Start(io, path, reaper);
    REQUIRE_FALSE(server.ok());
    CHECK(std::filesystem::is_symlink(path));
    CHECK(testing::ReadFile(target) == "x");
  }
  SECTION("a FIFO of this user left by an earlier run is replaced") {
    const std::string path = tmp.File("watchdog_timer");
    testing::MakeFifo(path);
    auto server = FileTimerServer::Start(io, path, reaper);
    REQUIRE(server.ok());
  }
}

}  // namespace gculaunch
