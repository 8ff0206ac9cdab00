// Who owns a TCP socket of this host: the one look-up behind "no joining a stranger's listener"
// (launcher/cluster/agent_link.h) and "the connection budget is the job's" (the store's cap in
// rendezvous/server.h, the metrics endpoint's share in launcher/ops/metrics_http.h); the rules
// are in docs/security.md ("A local user who is not the job's user").
//
// The socket is found by its exact 4-tuple (its own address and port, its peer's) through
// NETLINK_SOCK_DIAG, the kernel's lookup that `ss` uses: one request, one reply, no privilege
// needed, and no scan of /proc/net/tcp (which costs a line per socket of the host).  An IPv4
// connection served by a dual-stack (IPv6) socket is found too: the kernel looks a v4-mapped
// 4-tuple up among the IPv4 connections, where such sockets are hashed.  The uid is the one
// the kernel reports: the user that created the socket, or for an accepted socket the user of
// the process that accepted it.  An end that no process holds (closed by its owner: an orphan
// or a TIME_WAIT entry, which the kernel reports with uid 0; or not yet accepted) has no
// owner: the look-up says kNoOwner, never "root".
//
// Only what this host's network namespace holds can be found: the peer of a connection from
// another host (or another namespace) is "elsewhere", not an error.
//
// Thread safety: stateless; each call opens and closes its own netlink socket, and never
// blocks (the kernel answers before the request's send returns).
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <optional>

#include "base/error.h"

namespace gculaunch::sys {

/// The "uid" of a socket no process holds (closed by its owner, or not yet accepted), or of a
/// loopback socket that is gone.
inline constexpr uid_t kNoOwner = static_cast<uid_t>(-1);

/// The uid of the TCP socket whose own address is `self` and whose peer is `peer` (IPv4 or
/// IPv6, v4-mapped or not); nullopt when this host has no such socket (kNoOwner when its
/// address is a loopback one: such a socket can only have been here).  An error when the
/// kernel could not be asked (no netlink, say), naming why.
Result<std::optional<uid_t>> TcpSocketOwner(const sockaddr_storage& self,
                                            const sockaddr_storage& peer);

/// The uid of the socket at the other end of the connected TCP socket `fd` (the client of an
/// accepted socket, the server's accepted socket of a connected one); nullopt when that end
/// is not on this host.
Result<std::optional<uid_t>> PeerSocketOwner(int fd);

/// Whether `uid` is the job's user (this process's effective uid) or root: the two users
/// gculaunch trusts (docs/security.md, "What gculaunch trusts").
bool IsJobUserOrRoot(uid_t uid);

/// Whether the peer of the connected TCP socket `fd` is a socket of this host owned by
/// another user than the job's and root, or one already closed by its owner (kNoOwner:
/// closing our end loses nothing of the job's).  False when the peer is elsewhere, and when
/// the look-up failed (a peer that cannot be told is not blamed).
bool IsForeignLocalPeer(int fd);

}  // namespace gculaunch::sys
