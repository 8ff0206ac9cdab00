// Networks in CIDR notation ("10.0.0.0/8", "fd00::/64", "198.18.0.2"): parsed and matched in
// plain C++, so that the launch spec (which has no sockets) can check --store-allow and the
// store can match its peers against the same values.
//
// An IPv4 network also matches the IPv4-mapped IPv6 form of its addresses (::ffff:a.b.c.d),
// which is how a dual-stack listener sees IPv4 peers.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace gculaunch {

struct Network {
  bool v6 = false;
  std::array<std::uint8_t, 16> bytes{};  ///< the address, host bits cleared (IPv4: first 4)
  int prefix = 0;                        ///< leading bits that must match

  /// "10.0.0.0/8", "fd00::/64" (canonical: host bits cleared, IPv6 compressed).
  std::string ToString() const;
  bool operator==(const Network&) const = default;
};

/// An address alone is a network of one address (/32, /128).  The error names `text` and
/// what is wrong with it, in one line.
Result<Network> ParseNetwork(std::string_view text);

/// A ','-separated list of networks; empty items are errors.
Result<std::vector<Network>> ParseNetworkList(std::string_view text);

/// Whether the address `bytes` (4 bytes: IPv4, 16: IPv6) is in `network`.
bool Contains(const Network& network, const std::uint8_t* bytes, std::size_t size);

/// Whether the address is a loopback address: 127.0.0.0/8, ::1, or ::ffff:127.0.0.0/104.
bool IsLoopback(const std::uint8_t* bytes, std::size_t size);

}  // namespace gculaunch
