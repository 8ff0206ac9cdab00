#include "launcher/run/worker_group.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <cerrno>
#include <filesystem>
#include <map>
#include <sstream>
#include <thread>

#include "tests/launcher/run/worker_fixture.h"
#include "tests/support/test_util.h"

namespace gculaunch {
namespace {

using Fixture = testing::WorkerFixture;

}  // namespace

TEST_CASE("worker group reports every rank's exit and prefixes its output", "[worker_group]") {
  for (bool force_sigchld : {false, true}) {
    Fixture f(force_sigchld);
    std::map<int, WorkerExit> exits;
    bool output_closed = false;
    WorkerGroup group(
        f.Deps(), 0, [&](int local_rank, WorkerExit exit) { exits.emplace(local_rank, exit); },
        [&] { output_closed = true; });
    std::vector<RankLaunch> ranks;
    for (int i = 0; i < 3; ++i) {
      ranks.push_back(f.Rank(i, {"print", "hello " + std::to_string(i), "eprint",
                                 "oops " + std::to_string(i), "exit", std::to_string(i)}));
      ranks.back().rank = 10 + i;  // the prefix uses the global rank
    }
    REQUIRE(group.Start(ranks).ok());
    REQUIRE(testing::RunUntil(f.io, [&] { return exits.size() == 3 && output_closed; }));
    CHECK(group.AllExited());
    CHECK(group.CheckGroupsEmpty());
    for (int i = 0; i < 3; ++i) CHECK(exits.at(i) == WorkerExit::Exited(i));
    const std::string out = f.ConsoleOut();
    const std::string err = f.ConsoleErr();
    for (int i = 0; i < 3; ++i) {
      CHECK(out.find("[rank" + std::to_string(10 + i) + "]: hello " + std::to_string(i) + "\n") !=
            std::string::npos);
      CHECK(err.find("[rank" + std::to_string(10 + i) + "]: oops " + std::to_string(i) + "\n") !=
            std::string::npos);
    }
    const auto records = group.Records();
    REQUIRE(records.size() == 3);
    CHECK(records[2].stderr_tail == std::vector<std::string>{"oops 2"});
    CHECK(records[2].exit == WorkerExit::Exited(2));
    CHECK(records[2].pid > 0);
  }
}

TEST_CASE("a rank sees only fds 0, 1, 2 and its stdin is /dev/null", "[worker_group]") {
  Fixture f;
  int exited = 0;
  bool closed = false;
  WorkerGroup group(
      f.Deps(), 0, [&](int, WorkerExit) { ++exited; }, [&] { closed = true; });
  REQUIRE(group.Start({f.Rank(0, {"fds"})}).ok());
  REQUIRE(testing::RunUntil(f.io, [&] { return exited == 1 && closed; }));
  CHECK(f.ConsoleOut() == "[rank0]: fds: 0 1 2\n");
}

TEST_CASE("SignalAll reaches a rank's trap and the whole group", "[worker_group]") {
  Fixture f;
  const std::string fifo = f.dir.File("ready");
  testing::MakeFifo(fifo);
  const std::string marker = f.dir.File("marker");
  const std::string grandchild_file = f.dir.File("grandchild");
  std::map<int, WorkerExit> exits;
  WorkerGroup group(
      f.Deps(), 0, [&](int lr, WorkerExit e) { exits.emplace(lr, e); }, nullptr);
  REQUIRE(group
              .Start({f.Rank(0, {"trap", "TERM", marker, "0", "grandchild", grandchild_file, "fifo",
                                 fifo, "ready", "pause"})})
              .ok());
  REQUIRE(testing::ReadFifo(fifo) == "ready\n");  // trap installed, grandchild forked
  const pid_t grandchild = std::stoi(testing::ReadFile(grandchild_file));
  const int grandchild_fd = sys::PidfdOpen(grandchild);
  REQUIRE(grandchild_fd >= 0);

  CHECK(group.SignalAll(SIGTERM) == 1);
  REQUIRE(testing::RunUntil(f.io, [&] { return exits.size() == 1; }));
  CHECK(exits.at(0) == WorkerExit::Exited(0));
  pollfd p{grandchild_fd, POLLIN, 0};
  REQUIRE(::poll(&p, 1, -1) == 1);  // the grandchild is gone too
  ::close(grandchild_fd);
  // The grandchild inherited the trap (fork without exec): both wrote the
  // marker, so the group signal reached the grandchild too.
  CHECK(testing::ReadFile(marker) == "TERM\nTERM\n");
  CHECK(group.CheckGroupsEmpty());
  CHECK(group.SignalAll(SIGTERM) == 0);  // an empty group is never signalled again
}

TEST_CASE("an exited rank's zombie pins its group until the group empties, then is released",
          "[worker_group]") {
  for (bool force_sigchld : {false, true}) {
    Fixture f(force_sigchld);
    const std::string grandchild_file = f.dir.File("grandchild");
    int exited = 0;
    WorkerGroup group(
        f.Deps(), 0, [&](int, WorkerExit) { ++exited; }, nullptr);
    REQUIRE(group.Start({f.Rank(0, {"grandchild", grandchild_file, "exit", "0"})}).ok());
    REQUIRE(testing::RunUntil(f.io, [&] { return exited == 1; }));
    const pid_t leader = group.Records().at(0).pid;
    const pid_t grandchild = std::stoi(testing::ReadFile(grandchild_file));
    // Let the first look at the group run: the grandchild keeps it alive, so the leader
    // must still be our zombie: no other process can be given its number.
    testing::RunUntil(
        f.io, [] { return false; }, std::chrono::seconds(1));
    sys::ProcInfo info;
    REQUIRE(sys::ReadProcInfo(leader, &info));
    CHECK(info.state == 'Z');
    CHECK(f.watcher.unreleased() == 1);

    // The grandchild goes on its own (no teardown, no SignalAll): the group is noticed
    // empty by the periodic look, and the zombie is released.
    REQUIRE(::kill(grandchild, SIGKILL) == 0);
    REQUIRE(testing::RunUntil(f.io, [&] { return f.watcher.unreleased() == 0; }));
    CHECK_FALSE(sys::ReadProcInfo(leader, &info));
    CHECK(group.CheckGroupsEmpty());
    CHECK(group.SignalAll(SIGKILL) == 0);  // an empty group is never signalled again
  }
}

TEST_CASE("a reaped rank's group stays non-empty while a grandchild lives", "[worker_group]") {
  Fixture f;
  const std::string grandchild_file = f.dir.File("grandchild");
  int exited = 0;
  WorkerGroup group(
      f.Deps(), 0, [&](int, WorkerExit) { ++exited; }, nullptr);
  REQUIRE(group.Start({f.Rank(0, {"grandchild", grandchild_file, "exit", "0"})}).ok());
  REQUIRE(testing::RunUntil(f.io, [&] { return exited == 1; }));
  const pid_t grandchild = std::stoi(testing::ReadFile(grandchild_file));
  CHECK(group.AllExited());
  CHECK_FALSE(group.CheckGroupsEmpty());
  const auto survivors = group.Survivors();
  REQUIRE(survivors.size() == 1);
  CHECK(survivors[0].pid == grandchild);

  const int fd = sys::PidfdOpen(grandchild);
  REQUIRE(fd >= 0);
  CHECK(group.SignalAll(SIGKILL) == 1);
  pollfd p{fd, POLLIN, 0};
  REQUIRE(::poll(&p, 1, -1) == 1);
  ::close(fd);
  CHECK(group.CheckGroupsEmpty());
}

TEST_CASE("a rank that cannot be started stops Start and names the rank", "[worker_group]") {
  Fixture f;
  int exited = 0;
  WorkerGroup group(
      f.Deps(), 0, [&](int, WorkerExit) { ++exited; }, nullptr);
  auto bad = f.Rank(1, {});
  bad.program = f.dir.File("missing-program");
  int failed = -1;
  auto status = group.Start({f.Rank(0, {"pause"}), bad, f.Rank(2, {"pause"})}, &failed);
  REQUIRE_FALSE(status.ok());
  CHECK(failed == 1);
  CHECK(status.error().what.find("missing-program") != std::string::npos);
  CHECK(group.SignalAll(SIGKILL) == 1);  // rank 0 only; rank 2 never started
  REQUIRE(testing::RunUntil(f.io, [&] { return exited == 1; }));
  CHECK(group.AllExited());
  const auto records = group.Records();
  REQUIRE(records.size() == 2);
  CHECK(records[1].pid == -1);
}

TEST_CASE("log files get the raw bytes, the console gets visible whole lines", "[worker_group]") {
  Fixture f;
  const std::string fifo = f.dir.File("ready");
  testing::MakeFifo(fifo);
  std::map<int, WorkerExit> exits;
  bool closed = false;
  WorkerGroup group(
      f.Deps(), 0, [&](int lr, WorkerExit e) { exits.emplace(lr, e); }, [&] { closed = true; });
  auto rank = f.Rank(0, {"raw", "a\\r\\nprogress 10%\\rprogress 20%", "eraw", "partial", "fifo",
                         fifo, "ready", "pause"});
  rank.log_dir = sys::HeldDir::Open(f.dir.path()).value();
  rank.stdout_log = "stdout.log";
  rank.stderr_log = "stderr.log";
  REQUIRE(group.Start({rank}).ok());
  REQUIRE(testing::ReadFifo(fifo) == "ready\n");
  // The partial stderr line shows up once the stream went idle.
  REQUIRE(testing::RunUntil(f.io, [&] { return !group.Records()[0].stderr_tail.empty(); }));
  group.SignalAll(SIGKILL);
  REQUIRE(testing::RunUntil(f.io, [&] { return exits.size() == 1 && closed; }));
  CHECK(f.ConsoleOut() == "[rank0]: a\n[rank0]: progress 20%\n");
  CHECK(f.ConsoleErr() == "[rank0]: partial\n");
  CHECK(testing::ReadFile(f.dir.File("stdout.log")) == "a\r\nprogress 10%\rprogress 20%");
  CHECK(testing::ReadFile(f.dir.File("stderr.log")) == "partial");
}

TEST_CASE("a rank's error file is copied to the log directory when it exits", "[worker_group]") {
  Fixture f;
  std::map<int, WorkerExit> exits;
  WorkerGroup group(
      f.Deps(), 0, [&](int lr, WorkerExit e) { exits.emplace(lr, e); }, nullptr);
  // What the rank wrote in gculaunch's private directory (written here before it starts).
  testing::WriteFile(f.dir.File("private-error.json"), "{\"message\": \"boom\"}");
  auto failing = f.Rank(0, {"exit", "1"});
  failing.log_dir = sys::HeldDir::Open(f.dir.File("logs")).value();
  failing.error_file = f.dir.File("private-error.json");
  failing.error_file_copy = "attempt_0/0/error.json";
  auto clean = f.Rank(1, {"exit", "0"});  // wrote none: nothing copied
  clean.log_dir = failing.log_dir;
  clean.error_file = f.dir.File("none.json");
  clean.error_file_copy = "attempt_0/1/error.json";
  REQUIRE(group.Start({failing, clean}).ok());
  REQUIRE(testing::RunUntil(f.io, [&] { return exits.size() == 2; }));
  CHECK(testing::ReadFile(f.dir.File("logs/attempt_0/0/error.json")) == "{\"message\": \"boom\"}");
  CHECK_FALSE(std::filesystem::exists(f.dir.File("logs/attempt_0/1/error.json")));
  const auto records = group.Records();
  CHECK(records[0].error_file == f.dir.File("private-error.json"));  // read for the summary
  CHECK(records[0].error_file_shown == f.dir.File("logs/attempt_0/0/error.json"));
  CHECK(records[1].error_file_shown.empty());
}

TEST_CASE("a full console makes ranks wait, and no line is lost or torn", "[worker_group]") {
  // Console = a pipe that nobody reads at first: the writer blocks, the queue
  // passes its high-water mark, the rank streams park.  Then a reader drains
  // the pipe and everything arrives in order.
  int console[2];
  REQUIRE(::pipe2(console, O_CLOEXEC) == 0);
  Fixture f(false, OutputWriter::Limits{4096, 1024});
  f.out = OutputTarget::Borrowed(console[1], "console pipe");
  std::map<int, WorkerExit> exits;
  bool closed = false;
  WorkerGroup group(
      f.Deps(), 0, [&](int lr, WorkerExit e) { exits.emplace(lr, e); }, [&] { closed = true; });
  constexpr int kLines = 3000;
  REQUIRE(group.Start({f.Rank(0, {"lines", std::to_string(kLines), "80", "L"})}).ok());
  REQUIRE(testing::RunUntil(f.io, [&] { return f.flow.parked() > 0; }));
  CHECK(f.writer.congested());

  std::string received;
  std::thread reader([&] {
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(console[0], buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      received.append(buf, static_cast<size_t>(n));
    }
  });
  REQUIRE(testing::RunUntil(f.io, [&] { return exits.size() == 1 && closed; }));
  REQUIRE(f.writer.Finish(std::chrono::seconds(30)));
  ::close(console[1]);
  reader.join();
  ::close(console[0]);

  std::istringstream lines(received);
  std::string line;
  int expected = 0;
  const std::string payload(80, 'x');
  while (std::getline(lines, line)) {
    REQUIRE(line == "[rank0]: L " + std::to_string(expected) + " " + payload);
    ++expected;
  }
  CHECK(expected == kLines);
}

}  // namespace gculaunch
