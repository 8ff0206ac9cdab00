#include "launcher/cluster/net_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

namespace gculaunch {
namespace {

// A connected loopback pair in `family`; returns the client fd (the caller closes all).
struct LoopbackPair {
  explicit LoopbackPair(int family) {
    listener = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(listener >= 0);
    sockaddr_storage ss{};
    socklen_t len = 0;
    if (family == AF_INET) {
      auto* in = reinterpret_cast<sockaddr_in*>(&ss);
      in->sin_family = AF_INET;
      in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      len = sizeof(sockaddr_in);
    } else {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
      in6->sin6_family = AF_INET6;
      in6->sin6_addr = in6addr_loopback;
      len = sizeof(sockaddr_in6);
    }
    REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&ss), len) == 0);
    REQUIRE(::listen(listener, 1) == 0);
    REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&ss), &len) == 0);
    client = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(client >= 0);
    REQUIRE(::connect(client, reinterpret_cast<sockaddr*>(&ss), len) == 0);
    port = ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                   : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  }
  ~LoopbackPair() {
    ::close(client);
    ::close(listener);
  }
  int listener = -1;
  int client = -1;
  int port = 0;
};

}  // namespace

TEST_CASE("net address: endpoints bracket IPv6 literals only", "[net_address]") {
  struct Row {
    const char* host;
    int port;
    const char* text;
    bool v6;
  };
  const Row rows[] = {
      {"198.18.0.1", 29500, "198.18.0.1:29500", false},
      {"node0", 29400, "node0:29400", false},
      {"node0.cluster.local", 1, "node0.cluster.local:1", false},
      {"::1", 29500, "[::1]:29500", true},
      {"fd00::1", 23456, "[fd00::1]:23456", true},
      {"fe80::1%eth0", 29500, "[fe80::1%eth0]:29500", true},
  };
  for (const Row& row : rows) {
    INFO(row.host);
    CHECK(FormatEndpoint(row.host, row.port) == row.text);
    CHECK(IsIpv6Literal(row.host) == row.v6);
  }
}

TEST_CASE("net address: numeric text of socket addresses", "[net_address]") {
  sockaddr_in in{};
  in.sin_family = AF_INET;
  REQUIRE(::inet_pton(AF_INET, "198.18.0.2", &in.sin_addr) == 1);
  auto v4 = AddressText(reinterpret_cast<sockaddr*>(&in), sizeof in);
  REQUIRE(v4.ok());
  CHECK(*v4 == "198.18.0.2");

  sockaddr_in6 in6{};
  in6.sin6_family = AF_INET6;
  REQUIRE(::inet_pton(AF_INET6, "fd00::2", &in6.sin6_addr) == 1);
  auto v6 = AddressText(reinterpret_cast<sockaddr*>(&in6), sizeof in6);
  REQUIRE(v6.ok());
  CHECK(*v6 == "fd00::2");

  // A dual-stack socket reports IPv4 peers as v4-mapped IPv6: shown as IPv4.
  REQUIRE(::inet_pton(AF_INET6, "::ffff:198.18.0.3", &in6.sin6_addr) == 1);
  auto mapped = AddressText(reinterpret_cast<sockaddr*>(&in6), sizeof in6);
  REQUIRE(mapped.ok());
  CHECK(*mapped == "198.18.0.3");

  // Link-local with a scope: the interface index 1 is lo on Linux.
  REQUIRE(::inet_pton(AF_INET6, "fe80::1", &in6.sin6_addr) == 1);
  in6.sin6_scope_id = 1;
  auto scoped = AddressText(reinterpret_cast<sockaddr*>(&in6), sizeof in6);
  REQUIRE(scoped.ok());
  CHECK(*scoped == "fe80::1%lo");

  sockaddr unix_like{};
  unix_like.sa_family = AF_UNIX;
  auto bad = AddressText(&unix_like, sizeof unix_like);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().what, Catch::Contains("neither IPv4 nor IPv6"));
}

TEST_CASE("net address: the local address of a connected socket, IPv4 and IPv6", "[net_address]") {
  {
    LoopbackPair pair(AF_INET);
    auto addr = LocalAddressOf(pair.client);
    REQUIRE(addr.ok());
    CHECK(*addr == "127.0.0.1");
  }
  {
    LoopbackPair pair(AF_INET6);
    auto addr = LocalAddressOf(pair.client);
    REQUIRE(addr.ok());
    CHECK(*addr == "::1");
  }
  auto closed = LocalAddressOf(-1);
  REQUIRE_FALSE(closed.ok());
  CHECK_THAT(closed.error().what, Catch::Contains("getsockname failed"));
}

TEST_CASE("net address: the route towards the master, without sending anything", "[net_address]") {
  auto v4 = RouteAddressTo("127.0.0.1", 29500);
  REQUIRE(v4.ok());
  CHECK(*v4 == "127.0.0.1");
  auto v6 = RouteAddressTo("::1", 29500);
  REQUIRE(v6.ok());
  CHECK(*v6 == "::1");
  auto bad = RouteAddressTo("no-such-host.invalid", 29500);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().what, Catch::Contains("cannot resolve no-such-host.invalid"));
  CHECK_THAT(bad.error().hint, Catch::Contains("MASTER_ADDR"));
}

// torchrun's rules for "the endpoint names this host", each saying which matched; a name that
// does not resolve is not this host, and the reason names the rules.  (The interface rule and
// the dummy-interface exception are exercised in network namespaces by
// tests/integration/test_c10d_node_ranks.py.)
TEST_CASE("net address: which rule makes the endpoint this host", "[net_address]") {
  const HostMatch localhost = MatchThisHost("localhost");
  CHECK(localhost.local);
  CHECK(localhost.why == "localhost is this host");
  const HostMatch loop4 = MatchThisHost("127.0.0.9");
  CHECK(loop4.local);
  CHECK(loop4.why == "127.0.0.9 is a loopback address");
  const HostMatch loop6 = MatchThisHost("[::1]");
  CHECK(loop6.local);
  CHECK(loop6.why == "::1 is a loopback address");
  char name[256] = {};
  REQUIRE(::gethostname(name, sizeof name - 1) == 0);
  const HostMatch self = MatchThisHost(name);
  CHECK(self.local);
  CHECK(self.why == std::string(name) + " is this host's name");
  const HostMatch none = MatchThisHost("no-such-host.invalid");
  CHECK_FALSE(none.local);
  CHECK(none.why ==
        "no-such-host.invalid is not localhost, a loopback address, this host's name (" +
            std::string(name) + ") or an address of its interfaces");
  // TEST-NET-1 is never an address of this machine.
  CHECK_FALSE(MatchThisHost("192.0.2.1").local);
}

}  // namespace gculaunch
