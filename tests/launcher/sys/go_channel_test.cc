#include "launcher/sys/go_channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "tests/support/test_util.h"

namespace gculaunch::sys {
namespace {

using std::chrono::milliseconds;

// What a standby's hook does with its stdin: read to end of file, then answer.
std::string ReadToEnd(int fd) {
  std::string all;
  char buffer[4096];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) return all;
    all.append(buffer, static_cast<size_t>(n));
  }
}

// The value of `r`, or `fallback` when it is an error.
template <typename T>
T Or(const Result<T>& r, T fallback) {
  return r.ok() ? *r : fallback;
}

struct Sent {
  std::optional<Status> answer;
};

// Holds the standby's end open, unread, until gculaunch's end is closed (POLLHUP, which
// poll reports without being asked; gculaunch's end of file alone is only POLLRDHUP).
void HoldUntilClosed(const UniqueFd& fd) {
  pollfd p{fd.get(), 0, 0};
  ::poll(&p, 1, 60000);
}

// Runs a go of `message` over a fresh pair; `standby` plays the standby's end on a thread.
// gculaunch's end is closed once the answer is in, which ends a standby that holds it.
Status RunGo(const std::string& message, milliseconds bound,
             const std::function<void(UniqueFd)>& standby) {
  auto pair = MakeGoSocketPair();
  REQUIRE(pair.ok());
  boost::asio::io_context io;
  auto channel = std::make_unique<GoChannel>(io, std::move(pair->first));
  std::thread peer([&standby, fd = pair->second.Release()]() mutable { standby(UniqueFd(fd)); });
  Sent sent;
  channel->Go(message, bound, [&](Status answer) { sent.answer = answer; });
  const bool ran = testing::RunUntil(io, [&] { return sent.answer.has_value(); });
  channel.reset();
  peer.join();
  REQUIRE(ran);
  return *sent.answer;
}

}  // namespace

TEST_CASE("go channel: a standby that reads everything and confirms", "[go_channel]") {
  std::string got;
  // 1 MiB: more than the socket takes at once, so the write waits for the reader.
  const std::string message(1 << 20, 'x');
  const Status answer = RunGo(message, milliseconds(20000), [&](UniqueFd fd) {
    got = ReadToEnd(fd.get());
    REQUIRE(::write(fd.get(), kGoConfirmation.data(), kGoConfirmation.size()) ==
            static_cast<ssize_t>(kGoConfirmation.size()));
  });
  CHECK(answer.ok());
  CHECK(got == message);
}

TEST_CASE("go channel: a standby that does not read fails the bound without a blocked loop",
          "[go_channel]") {
  // Far more than a Unix socket buffers: the writer must wait, and the bound ends it.
  const std::string message(8 << 20, 'x');
  const Status answer = RunGo(message, milliseconds(200), HoldUntilClosed);
  REQUIRE_FALSE(answer.ok());
  CHECK(answer.error().what == "did not read its go message within 200 ms (its stdin stayed full)");
}

TEST_CASE("go channel: every way a standby can fail the go has its own reason", "[go_channel]") {
  SECTION("it reads but never answers") {
    const Status answer = RunGo("A=1", milliseconds(200), [](UniqueFd fd) {
      ReadToEnd(fd.get());
      HoldUntilClosed(fd);  // no answer, no end of file
    });
    CHECK(answer.error().what == "did not confirm the go within 200 ms");
  }
  SECTION("it closes its stdin after reading") {
    const Status answer =
        RunGo("A=1", milliseconds(20000), [](UniqueFd fd) { ReadToEnd(fd.get()); });
    CHECK(answer.error().what == "closed its stdin before it confirmed the go");
  }
  SECTION("it answers something else") {
    const Status answer = RunGo("A=1", milliseconds(20000), [](UniqueFd fd) {
      ReadToEnd(fd.get());
      REQUIRE(::write(fd.get(), "no\n", 3) == 3);
    });
    CHECK(answer.error().what == "answered the go with something other than its confirmation");
  }
  SECTION("it is gone before the go") {
    const Status answer =
        RunGo(std::string(1 << 20, 'x'), milliseconds(20000), [](UniqueFd fd) { fd.Reset(); });
    CHECK(answer.error().what.find("closed its stdin") == 0);
  }
}

TEST_CASE("go channel: the non-blocking halves", "[go_channel]") {
  auto pair = MakeGoSocketPair();
  REQUIRE(pair.ok());
  const int ours = pair->first.get();
  const int theirs = pair->second.get();
  CHECK(Or(ReadSomeNow(ours, 8), std::string("?")).empty());  // nothing there yet: no wait
  CHECK(Or(WriteSomeNow(ours, "abc"), size_t{0}) == 3);
  CHECK(Or(ReadSomeNow(theirs, 8), std::string()) == "abc");
  // Fill it: a write that cannot go on says 0 instead of waiting.
  const std::string chunk(1 << 16, 'y');
  size_t total = 0;
  for (int i = 0; i < 1000; ++i) {
    auto n = WriteSomeNow(ours, chunk);
    REQUIRE(n.ok());
    if (*n == 0) break;
    total += *n;
  }
  CHECK(total > 0);
  CHECK(Or(WriteSomeNow(ours, chunk), size_t{1}) == 0);
  pair->second.Reset();
  CHECK_FALSE(WriteSomeNow(ours, "x").ok());  // EPIPE, and no SIGPIPE
  CHECK_FALSE(ReadSomeNow(ours, 8).ok());     // end of file
}

}  // namespace gculaunch::sys
