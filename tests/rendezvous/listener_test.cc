// Tests of rendezvous/listener.h: binding (port 0, wildcard, names), adopting a socket bound
// by someone else, close-on-exec and non-blocking flags, and the error messages.
#include "rendezvous/listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

namespace gculaunch::rendezvous {
namespace {

bool HasFdFlag(int fd, int flag) { return (::fcntl(fd, F_GETFD) & flag) != 0; }
bool HasStatusFlag(int fd, int flag) { return (::fcntl(fd, F_GETFL) & flag) != 0; }
bool IsListening(int fd) {
  int on = 0;
  socklen_t len = sizeof on;
  return ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) == 0 && on != 0;
}

// Connects to 127.0.0.1:port; true on success.
bool ConnectV4(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

int BoundV4Socket(bool listen_too) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);  // deliberately without CLOEXEC
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  if (listen_too) REQUIRE(::listen(fd, 16) == 0);
  return fd;
}

TEST_CASE("listener: loopback port 0 gets a real port, CLOEXEC and non-blocking", "[listener]") {
  auto l = ListenSocket::Bind("127.0.0.1", 0);
  REQUIRE(l.ok());
  CHECK(l->port() != 0);
  CHECK(l->address() == "127.0.0.1");
  CHECK(l->family() == AF_INET);
  CHECK(HasFdFlag(l->fd(), FD_CLOEXEC));
  CHECK(HasStatusFlag(l->fd(), O_NONBLOCK));
  CHECK(IsListening(l->fd()));
  int reuse = 0;
  socklen_t len = sizeof reuse;
  ::getsockopt(l->fd(), SOL_SOCKET, SO_REUSEADDR, &reuse, &len);
  CHECK(reuse != 0);
  CHECK(ConnectV4(l->port()));
}

TEST_CASE("listener: a port in use is a clear error", "[listener]") {
  auto first = ListenSocket::Bind("127.0.0.1", 0);
  REQUIRE(first.ok());
  auto second = ListenSocket::Bind("127.0.0.1", first->port());
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().what ==
        "cannot listen on 127.0.0.1:" + std::to_string(first->port()) + ": Address already in use");
  CHECK_THAT(second.error().hint, Catch::Contains("another process is using port"));
}

TEST_CASE("listener: all interfaces accept IPv4 clients", "[listener]") {
  auto l = ListenSocket::Bind("", 0);
  REQUIRE(l.ok());
  // [::] with IPV6_V6ONLY off, or 0.0.0.0 where IPv6 is unavailable.
  CHECK((l->address() == "::" || l->address() == "0.0.0.0"));
  if (l->family() == AF_INET6) {
    int v6only = 1;
    socklen_t len = sizeof v6only;
    ::getsockopt(l->fd(), IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &len);
    CHECK(v6only == 0);
  }
  CHECK(ConnectV4(l->port()));
}

TEST_CASE("listener: names resolve, bad hosts fail clearly", "[listener]") {
  auto local = ListenSocket::Bind("localhost", 0);
  REQUIRE(local.ok());
  CHECK(local->port() != 0);
  auto unknown = ListenSocket::Bind("no-such-host.invalid", 0);
  REQUIRE_FALSE(unknown.ok());
  CHECK_THAT(unknown.error().what, Catch::Contains("cannot resolve 'no-such-host.invalid'"));
  auto foreign = ListenSocket::Bind("192.0.2.1", 0);  // TEST-NET-1: never local
  REQUIRE_FALSE(foreign.ok());
  CHECK_THAT(foreign.error().what, Catch::Contains("Cannot assign requested address"));
  CHECK_THAT(foreign.error().hint, Catch::Contains("not one of this machine's"));
}

TEST_CASE("listener: adopting a socket bound by someone else", "[listener]") {
  SECTION("bound, not listening: made CLOEXEC, non-blocking and listening") {
    const int fd = BoundV4Socket(false);
    CHECK_FALSE(HasFdFlag(fd, FD_CLOEXEC));
    auto l = ListenSocket::AdoptForTest(fd);
    REQUIRE(l.ok());
    CHECK(l->fd() == fd);
    CHECK(HasFdFlag(fd, FD_CLOEXEC));
    CHECK(HasStatusFlag(fd, O_NONBLOCK));
    CHECK(IsListening(fd));
    CHECK(ConnectV4(l->port()));
  }
  SECTION("already listening") {
    const int fd = BoundV4Socket(true);
    auto l = ListenSocket::AdoptForTest(fd);
    REQUIRE(l.ok());
    CHECK(ConnectV4(l->port()));
  }
  SECTION("not bound: refused, and the fd is closed") {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    auto l = ListenSocket::AdoptForTest(fd);
    REQUIRE_FALSE(l.ok());
    CHECK_THAT(l.error().what, Catch::Contains("is not bound"));
    CHECK(::fcntl(fd, F_GETFD) == -1);
  }
  SECTION("not a socket") {
    int p[2];
    REQUIRE(::pipe(p) == 0);
    ::close(p[1]);
    auto l = ListenSocket::AdoptForTest(p[0]);
    REQUIRE_FALSE(l.ok());
    CHECK_THAT(l.error().what, Catch::Contains("it is not a TCP socket"));
  }
}

TEST_CASE("listener: ownership moves and can be released", "[listener]") {
  auto l = ListenSocket::Bind("127.0.0.1", 0);
  REQUIRE(l.ok());
  ListenSocket moved = std::move(*l);
  const int fd = moved.fd();
  CHECK(l->fd() == -1);
  CHECK(moved.Release() == fd);
  CHECK(moved.fd() == -1);
  CHECK(::fcntl(fd, F_GETFD) >= 0);  // still open: released, not closed
  ::close(fd);
}

}  // namespace
}  // namespace gculaunch::rendezvous
