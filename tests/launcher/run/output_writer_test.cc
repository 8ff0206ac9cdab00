#include "launcher/run/output_writer.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <future>
#include <thread>

#include "tests/support/test_util.h"

namespace gculaunch {

TEST_CASE("output writer writes every chunk in order, per target", "[output_writer]") {
  testing::TempDir dir;
  auto a = OutputTarget::FileForTest(dir.File("a"));
  auto b = OutputTarget::FileForTest(dir.File("b"));
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

TEST_CASE("a full disk loses only what did not fit, with one warning each way", "[output_writer]") {
  testing::TempDir dir;
  const std::string warnings_file = dir.File("warnings");
  auto warnings = OutputTarget::FileForTest(warnings_file);
  REQUIRE(warnings.ok());
  auto log = OutputTarget::FileForTest("/dev/full");  // every write: ENOSPC
  REQUIRE(log.ok());
  OutputWriter writer({}, nullptr);
  writer.set_warnings(*warnings);
  writer.Write(*log, "one\n");
  writer.Write(*log, "two\n");
  REQUIRE(writer.WaitDrained(std::chrono::seconds(30)));
  REQUIRE(writer.bytes_dropped() == 8);
  CHECK(writer.log_bytes_dropped() == 8);  // counted for the summary and the metrics
  auto other = OutputTarget::FileForTest(dir.File("other"));
  REQUIRE(other.ok());
  writer.Write(*other, "to a file that takes it\n");
  REQUIRE(writer.WaitDrained(std::chrono::seconds(30)));
  CHECK(writer.log_bytes_dropped() == 8);
  CHECK_FALSE((*log)->failed());  // space may come back: not dropped for good
  // Space is back: the same descriptor now names a regular file.
  const std::string resumed = dir.File("resumed");
  const int file = ::open(resumed.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  REQUIRE(file >= 0);
  REQUIRE(::dup3(file, (*log)->fd(), O_CLOEXEC) == (*log)->fd());
  ::close(file);
  writer.Write(*log, "three\n");
  REQUIRE(writer.Finish(std::chrono::seconds(10)));
  CHECK(testing::ReadFile(resumed) == "three\n");
  CHECK(testing::ReadFile(warnings_file) ==
        "gculaunch: warning: cannot write /dev/full: No space left on device; its output is lost "
        "until there is space again (fix: free space on that file system, or give --log-dir "
        "another one)\n"
        "gculaunch: warning: writing /dev/full again; 8 bytes of it were lost while it could not "
        "be written\n");
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

namespace {

// A pseudo-terminal in raw mode: what the writer writes to `terminal` is read back unchanged.
struct Pty {
  Pty() {
    master = ::posix_openpt(O_RDWR | O_NOCTTY);
    REQUIRE(master >= 0);
    REQUIRE(::grantpt(master) == 0);
    REQUIRE(::unlockpt(master) == 0);
    slave = ::open(::ptsname(master), O_RDWR | O_NOCTTY);
    REQUIRE(slave >= 0);
    termios t{};
    REQUIRE(::tcgetattr(slave, &t) == 0);
    ::cfmakeraw(&t);
    REQUIRE(::tcsetattr(slave, TCSANOW, &t) == 0);
    winsize ws{};
    ws.ws_col = 12;
    ws.ws_row = 24;
    REQUIRE(::ioctl(slave, TIOCSWINSZ, &ws) == 0);
  }
  ~Pty() {
    ::close(slave);
    ::close(master);
  }
  std::string Read() {
    std::string out;
    char buf[4096];
    for (;;) {
      pollfd p{master, POLLIN, 0};
      if (::poll(&p, 1, 200) <= 0) return out;
      const ssize_t n = ::read(master, buf, sizeof buf);
      if (n <= 0) return out;
      out.append(buf, static_cast<size_t>(n));
    }
  }
  int master = -1, slave = -1;
};

}  // namespace

TEST_CASE("a terminal shows a progress bar live and ends its line before other output",
          "[output_writer]") {
  Pty pty;
  auto tty = OutputTarget::Borrowed(pty.slave, "tty");
  REQUIRE(tty->terminal());
  int a = 0, b = 0;  // two rank streams
  OutputWriter writer({}, nullptr);
  writer.WriteProgress(tty, "[r0]: 1/3", &a);
  writer.WriteProgress(tty, "[r0]: 2/3", &a);             // redrawn in place
  writer.Write(tty, "[r1]: hello\n", &b);                 // the bar's line is ended first
  writer.WriteProgress(tty, "[r0]: 3/3 0123456789", &a);  // a new bar line, cut to 11 columns
  writer.Urgent(tty, "gculaunch: note\n");                // gculaunch's own line ends it too
  writer.WriteProgress(tty, "[r0]: 3/3", &a);
  writer.Write(tty, "[r0]: done\n[r0]: next\n", &a);  // its final state replaces the bar
  writer.Write(tty, "[r1]: plain\n", &b);
  REQUIRE(writer.Finish(std::chrono::seconds(10)));
  const std::string clear = "\r\x1b[K";
  CHECK(pty.Read() == clear + "[r0]: 1/3" + clear + "[r0]: 2/3" + "\n[r1]: hello\n" + clear +
                          "[r0]: 3/3 0" + "\ngculaunch: note\n" + clear + "[r0]: 3/3" + clear +
                          "[r0]: done\n[r0]: next\n[r1]: plain\n");
  // Files get no terminal control bytes.
  testing::TempDir dir;
  auto file = OutputTarget::FileForTest(dir.File("f"));
  REQUIRE(file.ok());
  CHECK_FALSE((*file)->terminal());
}

}  // namespace gculaunch
