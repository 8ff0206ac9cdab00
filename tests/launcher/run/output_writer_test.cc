#include "launcher/run/output_writer.h"

#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <future>

#include "tests/support/test_util.h"

namespace gculaunch {

TEST_CASE("output writer writes every chunk in order, per target", "[output_writer]") {
  testing::TempDir dir;
  auto a = OutputTarget::File(dir.File("a"));
  auto b = OutputTarget::File(dir.File("b"));
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  OutputWriter writer({}, nullptr);
  std::string expect_a, expect_b;
  for (int i = 0; i < 1000; ++i) {
    const std::string line = "line " + std::to_string(i) + "\n";
    writer.Write(i % 3 == 0 ? *b : *a, line);
    (i % 3 == 0 ? expect_b : expect_a) += line;
  }
  writer.Urgent(*a, "urgent\n");
  expect_a += "urgent\n";
  REQUIRE(writer.Finish(std::chrono::seconds(10)));
  CHECK(testing::ReadFile(dir.File("a")) == expect_a);
  CHECK(testing::ReadFile(dir.File("b")) == expect_b);
  CHECK(writer.bytes_written() == expect_a.size() + expect_b.size());
}

TEST_CASE("output writer reports congestion and calls back when there is room", "[output_writer]") {
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  std::promise<void> space;
  auto space_seen = space.get_future();
  bool once = false;
  OutputWriter writer({/*high_water=*/100000, /*low_water=*/1000}, [&] {
    if (!once) {
      once = true;
      space.set_value();
    }
  });
  auto target = OutputTarget::Borrowed(p[1], "pipe");
  // 200 kB into a 64 kB pipe nobody reads: the queue stays above high water.
  bool accepted = true;
  for (int i = 0; i < 200; ++i) accepted = writer.Write(target, std::string(1000, 'x'));
  CHECK_FALSE(accepted);
  CHECK(writer.congested());
  // Drain the pipe; the writer gets through and calls back.
  size_t total = 0;
  char buf[65536];
  while (total < 200000) {
    const ssize_t n = ::read(p[0], buf, sizeof buf);
    REQUIRE(n > 0);
    total += static_cast<size_t>(n);
  }
  space_seen.wait();
  CHECK_FALSE(writer.congested());
  REQUIRE(writer.Finish(std::chrono::seconds(10)));
  ::close(p[0]);
  ::close(p[1]);
}

TEST_CASE("a broken console is dropped, not fatal", "[output_writer]") {
  struct sigaction ignore {
  }, old{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &old);  // gculaunch ignores SIGPIPE the same way
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  ::close(p[0]);
  OutputWriter writer({}, nullptr);
  auto target = OutputTarget::Borrowed(p[1], "closed pipe");
  writer.Write(target, "one\n");
  writer.Write(target, "two\n");
  REQUIRE(writer.Finish(std::chrono::seconds(10)));
  CHECK(target->failed());
  CHECK(writer.bytes_dropped() == 8);
  ::close(p[1]);
  ::sigaction(SIGPIPE, &old, nullptr);
}

}  // namespace gculaunch
