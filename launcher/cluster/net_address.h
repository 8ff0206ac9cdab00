// Network addresses as the multi-node rendezvous shows and publishes them.
//
// What it owns: nothing; text forms of host/port pairs and two look-ups of this host's own
// address, always numeric:
//   * LocalAddressOf(fd): the local address of a connected socket (getsockname).  A node
//     publishes this as "the address that routes to the master": it is the interface the
//     kernel chose for the store connection, so it is reachable from the master whatever
//     the host name says, and no reverse DNS is ever involved;
//   * RouteAddressTo(host, port): the same for the master itself, which has no store
//     connection of its own: a UDP socket connect()ed to MASTER_ADDR picks the route
//     without sending a packet.
// Text forms: IPv4 "198.18.0.1", IPv6 "fd00::1" (a link-local one keeps its scope as
// "fe80::1%eth0"), an IPv4-mapped IPv6 address is shown as IPv4.  Endpoints put brackets
// around IPv6 literals only: "198.18.0.1:29500", "[fd00::1]:29500", "node0:29500".
// MASTER_ADDR is exported to the ranks without brackets, which is
// what env:// expects.
//
// Thread safety: pure functions and stateless system calls.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <string>

#include "base/error.h"

namespace gculaunch {

/// True for a host text that is an IPv6 literal ("::1", "fe80::1%eth0"): it has a ':'.
bool IsIpv6Literal(const std::string& host);

/// "host:port", with brackets around an IPv6 literal: "[::1]:29500".
std::string FormatEndpoint(const std::string& host, int port);

/// The numeric text of an IPv4 or IPv6 socket address (without the port); IPv4-mapped IPv6
/// addresses as IPv4; a non-zero IPv6 scope id as "%<interface name>" (or "%<number>").
/// Other families: an error.
Result<std::string> AddressText(const sockaddr* address, socklen_t length);

/// The local address of the connected socket `fd`, numeric (see the file comment).
Result<std::string> LocalAddressOf(int fd);

/// Bytes that arrived on the connected socket `fd` and wait to be read (FIONREAD); 0 when
/// there are none or the socket cannot be asked.  A peer whose bytes wait was not silent:
/// this process was late to read them (liveness.h).
std::size_t BytesWaiting(int fd);

/// Whether `host` (a c10d rendezvous endpoint's host) names this machine, and why: the rule
/// that matched, or why none did, in words for the layout and "waiting" lines.
struct HostMatch {
  bool local = false;
  std::string why;  ///< e.g. "198.18.0.1 is an address of interface eth0"
};

/// torchrun's rules first (c10d's is_host): "localhost", a loopback address, this host's name,
/// its canonical name, or an address this host's name resolves to.  Then gculaunch's wider
/// one: a name or address that resolves to an address of one of this machine's interfaces,
/// except a dummy interface's (NOARP and not point-to-point, e.g. kube-proxy's kube-ipvs0,
/// which holds every service address on every node).  Names that do not resolve: not local.
HostMatch MatchThisHost(const std::string& host);

/// This host's address on the route to host:port (numeric host or a name resolved with
/// getaddrinfo); no packet is sent.  The error names the host.
Result<std::string> RouteAddressTo(const std::string& host, int port);

}  // namespace gculaunch
