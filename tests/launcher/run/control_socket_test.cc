#include "launcher/run/control_socket.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace gculaunch {
namespace {

// Connects to "@gculaunch/<pid>", sends `request`, reads the answer to EOF (in a thread, so
// the test's io_context can serve it).
std::string Ask(const std::string& request) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string name = ControlSocketName(::getpid());
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    ::close(fd);
    return "connect failed";
  }
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  (void)!::write(fd, request.data(), request.size());
  std::string answer;
  char buffer[4096];
  for (int i = 0; i < 1000; ++i) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) break;
    answer.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return answer;
}

}  // namespace

TEST_CASE("control socket: the launches listed in /proc/net/unix", "[control_socket]") {
  const std::string text =
      "Num       RefCount Protocol Flags    Type St Inode Path\n"
      "0000000000000000: 00000002 00000000 00010000 0001 01 1001 @gculaunch/4242\n"
      "0000000000000000: 00000002 00000000 00010000 0001 01 1002 /run/systemd/notify\n"
      "0000000000000000: 00000003 00000000 00000000 0001 03 1003 @gculaunch/4242\n"
      "0000000000000000: 00000002 00000000 00010000 0001 01 1004 @gculaunch/17\n"
      "0000000000000000: 00000002 00000000 00010000 0001 01 1005 @gculaunch/x7\n"
      "0000000000000000: 00000002 00000000 00010000 0001 01 1006 @gculaunchx/9\n"
      "0000000000000000: 00000002 00000000 00010000 0001 01 1007\n";
  CHECK(ControlPidsFromNetUnix(text) == std::vector<int>{17, 4242});
  CHECK(ControlPidsFromNetUnix("").empty());
}

TEST_CASE("control socket: a command is answered, then the connection closes", "[control_socket]") {
  boost::asio::io_context io;
  std::vector<std::string> commands;
  auto socket =
      ControlSocket::Listen(io, [&](const std::string& command, const ControlSocket::Reply& reply) {
        commands.push_back(command);
        reply("answer to " + command + "\n");
      });
  REQUIRE(socket.ok());
  CHECK((*socket)->name() == "gculaunch/" + std::to_string(::getpid()));
  // Listed in this network namespace's /proc/net/unix.
  std::ifstream net("/proc/net/unix");
  std::stringstream listing;
  listing << net.rdbuf();
  const auto pids = ControlPidsFromNetUnix(listing.str());
  CHECK(std::find(pids.begin(), pids.end(), static_cast<int>(::getpid())) != pids.end());

  std::string first;
  std::string second;
  std::atomic<bool> done{false};
  std::thread client([&] {
    first = Ask("stacks\n");
    second = Ask("hello\r\n");
    done = true;
  });
  for (int i = 0; i < 1000 && !done; ++i) io.run_for(std::chrono::milliseconds(10));
  client.join();
  (*socket)->Stop();
  CHECK(first == "answer to stacks\n");
  CHECK(second == "answer to hello\n");
  CHECK(commands == std::vector<std::string>{"stacks", "hello"});
}

}  // namespace gculaunch
