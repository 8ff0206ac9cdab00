// Tests of base/cidr.h: parsing IPv4 and IPv6 networks, the one-line errors, matching
// (IPv4-mapped peers included) and loopback.
#include "base/cidr.h"

#include <arpa/inet.h>

#include <catch2/catch.hpp>

namespace gculaunch {
namespace {

std::string Canonical(const std::string& text) {
  auto n = ParseNetwork(text);
  REQUIRE(n.ok());
  return n->ToString();
}

bool In(const std::string& network, const std::string& address) {
  auto n = ParseNetwork(network);
  REQUIRE(n.ok());
  unsigned char bytes[16];
  if (::inet_pton(AF_INET, address.c_str(), bytes) == 1) return Contains(*n, bytes, 4);
  REQUIRE(::inet_pton(AF_INET6, address.c_str(), bytes) == 1);
  return Contains(*n, bytes, 16);
}

bool Loopback(const std::string& address) {
  unsigned char bytes[16];
  if (::inet_pton(AF_INET, address.c_str(), bytes) == 1) return IsLoopback(bytes, 4);
  REQUIRE(::inet_pton(AF_INET6, address.c_str(), bytes) == 1);
  return IsLoopback(bytes, 16);
}

TEST_CASE("cidr: networks are parsed and written canonically", "[cidr]") {
  CHECK(Canonical("10.0.0.0/8") == "10.0.0.0/8");
  CHECK(Canonical("10.1.2.3/8") == "10.0.0.0/8");  // host bits cleared
  CHECK(Canonical("198.18.0.2") == "198.18.0.2/32");
  CHECK(Canonical("0.0.0.0/0") == "0.0.0.0/0");
  CHECK(Canonical("198.18.0.0/30") == "198.18.0.0/30");
  CHECK(Canonical("fd00::/64") == "fd00::/64");
  CHECK(Canonical("FD00:0:0:0:1:0:0:0/80") == "fd00::1:0:0:0/80");
  CHECK(Canonical("::1") == "::1/128");
  CHECK(Canonical("::") == "::/128");
  CHECK(Canonical("1:2:3:4:5:6:7:8") == "1:2:3:4:5:6:7:8/128");
  CHECK(Canonical("1:0:0:2:0:0:0:3") == "1:0:0:2::3/128");
  CHECK(Canonical("::ffff:10.0.0.1") == "::ffff:a00:1/128");
  auto list = ParseNetworkList("10.0.0.0/8, fd00::/64");
  REQUIRE(list.ok());
  CHECK(list->size() == 2);
}

TEST_CASE("cidr: bad networks are one-line errors", "[cidr]") {
  const char* bad[] = {"",
                       "10.0.0",
                       "10.0.0.256",
                       "10.0.0.01",
                       "10.0.0.0/33",
                       "10.0.0.0/",
                       "10.0.0.0/-1",
                       "fd00::/129",
                       "1:2:3:4:5:6:7",
                       "1::2::3",
                       ":1::",
                       "12345::",
                       "g::",
                       "host.example",
                       "10.0.0.0/8x",
                       "1:2:3:4:5:6:7:8::"};
  for (const char* text : bad) {
    INFO(text);
    auto n = ParseNetwork(text);
    CHECK_FALSE(n.ok());
    if (!n.ok()) CHECK(n.error().what.find('\n') == std::string::npos);
  }
  auto n = ParseNetwork("10.0.0.0/40");
  REQUIRE_FALSE(n.ok());
  CHECK(n.error().what == "'10.0.0.0/40' is not a network: the prefix length must be 0 to 32");
  auto a = ParseNetwork("eth0");
  REQUIRE_FALSE(a.ok());
  CHECK(a.error().what == "'eth0' is not a network: 'eth0' is not a numeric IPv4 or IPv6 address");
  CHECK(a.error().hint == "write networks as 10.0.0.0/8, 198.18.0.5 or fd00::/64");
  CHECK_FALSE(ParseNetworkList("10.0.0.0/8,,fd00::/64").ok());
  CHECK_FALSE(ParseNetworkList("").ok());
}

TEST_CASE("cidr: matching, IPv4-mapped peers included", "[cidr]") {
  CHECK(In("198.18.0.0/30", "198.18.0.1"));
  CHECK(In("198.18.0.0/30", "198.18.0.3"));
  CHECK_FALSE(In("198.18.0.0/30", "198.18.0.4"));
  CHECK(In("198.18.0.0/30", "::ffff:198.18.0.2"));  // a dual-stack listener's IPv4 peer
  CHECK_FALSE(In("198.18.0.0/30", "::ffff:198.18.0.9"));
  CHECK_FALSE(In("198.18.0.0/30", "fd00::1"));
  CHECK(In("0.0.0.0/0", "8.8.8.8"));
  CHECK(In("fd00::/64", "fd00::1"));
  CHECK_FALSE(In("fd00::/64", "fd00:0:0:1::1"));
  CHECK_FALSE(In("fd00::/64", "10.0.0.1"));
  CHECK(In("10.0.0.0/9", "10.127.255.255"));
  CHECK_FALSE(In("10.0.0.0/9", "10.128.0.0"));
}

TEST_CASE("cidr: loopback", "[cidr]") {
  CHECK(Loopback("127.0.0.1"));
  CHECK(Loopback("127.5.0.1"));
  CHECK(Loopback("::1"));
  CHECK(Loopback("::ffff:127.0.0.1"));
  CHECK_FALSE(Loopback("198.18.0.1"));
  CHECK_FALSE(Loopback("::2"));
  CHECK_FALSE(Loopback("::ffff:10.0.0.1"));
}

}  // namespace
}  // namespace gculaunch
