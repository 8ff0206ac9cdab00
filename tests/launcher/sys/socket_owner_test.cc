#include "launcher/sys/socket_owner.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "launcher/sys/unique_fd.h"

namespace gculaunch::sys {
namespace {

constexpr uid_t kNobody = 65534;

// A listener on `family`'s `addr` (port 0), dual-stack when it is "::".
UniqueFd Listen(int family, const char* addr, std::uint16_t* port) {
  UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(fd.get() >= 0);
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (family == AF_INET) {
    auto& in = reinterpret_cast<sockaddr_in&>(ss);
    in.sin_family = AF_INET;
    REQUIRE(::inet_pton(AF_INET, addr, &in.sin_addr) == 1);
    len = sizeof in;
  } else {
    const int off = 0;
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    auto& in6 = reinterpret_cast<sockaddr_in6&>(ss);
    in6.sin6_family = AF_INET6;
    REQUIRE(::inet_pton(AF_INET6, addr, &in6.sin6_addr) == 1);
    len = sizeof in6;
  }
  REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) == 0);
  REQUIRE(::listen(fd.get(), 8) == 0);
  REQUIRE(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len) == 0);
  *port = ntohs(ss.ss_family == AF_INET ? reinterpret_cast<sockaddr_in&>(ss).sin_port
                                        : reinterpret_cast<sockaddr_in6&>(ss).sin6_port);
  return fd;
}

int Connect(int family, const char* addr, std::uint16_t port) {
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (family == AF_INET) {
    auto& in = reinterpret_cast<sockaddr_in&>(ss);
    in.sin_family = AF_INET;
    in.sin_port = htons(port);
    ::inet_pton(AF_INET, addr, &in.sin_addr);
    len = sizeof in;
  } else {
    auto& in6 = reinterpret_cast<sockaddr_in6&>(ss);
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(port);
    ::inet_pton(AF_INET6, addr, &in6.sin6_addr);
    len = sizeof in6;
  }
  if (::connect(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

uid_t OwnerOf(int fd) {
  auto owner = PeerSocketOwner(fd);
  REQUIRE(owner.ok());
  REQUIRE(owner->has_value());
  return **owner;
}

}  // namespace

TEST_CASE("socket owner: both ends of a connection of this user", "[socket_owner]") {
  struct Case {
    int listen_family;
    const char* listen_addr;
    int connect_family;
    const char* connect_addr;
  };
  // IPv4; a dual-stack listener serving an IPv4 client (its accepted socket is IPv6 with
  // v4-mapped addresses); IPv6 loopback.
  const Case c =
      GENERATE(Case{AF_INET, "127.0.0.1", AF_INET, "127.0.0.1"},
               Case{AF_INET6, "::", AF_INET, "127.0.0.1"}, Case{AF_INET6, "::1", AF_INET6, "::1"});
  std::uint16_t port = 0;
  UniqueFd listener = Listen(c.listen_family, c.listen_addr, &port);
  UniqueFd client(Connect(c.connect_family, c.connect_addr, port));
  REQUIRE(client.get() >= 0);
  UniqueFd served(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  REQUIRE(served.get() >= 0);
  CHECK(OwnerOf(client.get()) == ::geteuid());
  CHECK(OwnerOf(served.get()) == ::geteuid());
  CHECK_FALSE(IsForeignLocalPeer(client.get()));
  CHECK_FALSE(IsForeignLocalPeer(served.get()));
}

TEST_CASE("socket owner: a 4-tuple no socket has is not found", "[socket_owner]") {
  sockaddr_storage self{};
  sockaddr_storage peer{};
  for (auto* ss : {&self, &peer}) {
    auto& in = reinterpret_cast<sockaddr_in&>(*ss);
    in.sin_family = AF_INET;
    in.sin_addr.s_addr = htonl(0xC6120063);  // 198.18.0.99: no address of this host
    in.sin_port = htons(1);                  // nobody connects from port 1 to port 1
  }
  auto owner = TcpSocketOwner(self, peer);
  REQUIRE(owner.ok());
  CHECK_FALSE(owner->has_value());
  // On loopback the socket can only have been here: it is gone, and owned by nobody.
  for (auto* ss : {&self, &peer}) {
    reinterpret_cast<sockaddr_in&>(*ss).sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }
  owner = TcpSocketOwner(self, peer);
  REQUIRE(owner.ok());
  REQUIRE(owner->has_value());
  CHECK(**owner == kNoOwner);
  CHECK_FALSE(IsJobUserOrRoot(kNoOwner));
}

TEST_CASE("socket owner: ends of different families are an error", "[socket_owner]") {
  sockaddr_storage self{};
  sockaddr_storage peer{};
  self.ss_family = AF_INET;
  peer.ss_family = AF_INET6;  // ::, not v4-mapped
  CHECK_FALSE(TcpSocketOwner(self, peer).ok());
}

TEST_CASE("socket owner: a client of another user is that user's", "[socket_owner]") {
  REQUIRE(::geteuid() == 0);  // the tests run as root (setresuid below)
  std::uint16_t port = 0;
  UniqueFd listener = Listen(AF_INET, "127.0.0.1", &port);
  int done[2];
  REQUIRE(::pipe2(done, O_CLOEXEC) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(done[1]);
    if (::setresgid(kNobody, kNobody, kNobody) != 0 || ::setresuid(kNobody, kNobody, kNobody)) {
      ::_exit(3);
    }
    const int fd = Connect(AF_INET, "127.0.0.1", port);
    char byte = 0;
    ::read(done[0], &byte, 1);  // until the parent looked
    ::_exit(fd >= 0 ? 0 : 4);
  }
  ::close(done[0]);
  UniqueFd served(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  REQUIRE(served.get() >= 0);
  CHECK(OwnerOf(served.get()) == kNobody);
  CHECK(IsForeignLocalPeer(served.get()));
  CHECK(IsJobUserOrRoot(0));
  CHECK_FALSE(IsJobUserOrRoot(kNobody));
  ::close(done[1]);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

}  // namespace gculaunch::sys
