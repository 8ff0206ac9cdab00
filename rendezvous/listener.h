// ListenSocket: a bound, listening TCP socket held as a plain fd, before any io_context.
//
// Why a separate step: the launcher must own its store port before anything else happens
// (`--standalone` without a port binds port 0 and keeps that socket, so no rank can race it
// for the number), but it builds the Server later.  So the socket is made here, kept, and
// handed to Server's constructor.  A socket someone else created can be adopted too.
//
// Every fd made here is close-on-exec from birth (SOCK_CLOEXEC) and non-blocking: the
// launcher forks ranks from the same process, and none of them may inherit the port.
// Bind() sets SO_REUSEADDR and listens with a backlog of at least SOMAXCONN (the kernel caps
// it at net.core.somaxconn).
//
// Ownership: move-only; the destructor closes the fd unless Release()d.
// Thread safety: a plain value.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "base/error.h"

namespace gculaunch::rendezvous {

/// Listen backlog asked for by default; the kernel clamps it to net.core.somaxconn.
inline constexpr int kDefaultBacklog = 65535;

class ListenSocket {
 public:
  /// Binds host:port and listens.  `host`:
  ///   ""  or "*"       all interfaces: [::] with IPV6_V6ONLY off (IPv4 and IPv6), falling
  ///                    back to 0.0.0.0 where IPv6 is unavailable;
  ///   "::"             the same, without the IPv4 fallback;
  ///   "0.0.0.0"        all IPv4 interfaces only;
  ///   anything else    a numeric address or a name (resolved with getaddrinfo; the first
  ///                    address that binds wins), e.g. "127.0.0.1" or "localhost".
  /// Port 0 picks a free port; port() reports it.  `bind_errno`, if given, receives the
  /// errno of a failed bind or listen (e.g. EADDRINUSE), else 0.
  static Result<ListenSocket> Bind(const std::string& host, std::uint16_t port,
                                   int backlog = kDefaultBacklog, int* bind_errno = nullptr);

  /// Takes ownership of `fd`, a TCP socket that is already bound (listening or not).  Makes
  /// it close-on-exec and non-blocking and listens if it is not listening yet.  On error the
  /// fd is closed.
  static Result<ListenSocket> AdoptForTest(int fd, int backlog = kDefaultBacklog);

  ListenSocket(ListenSocket&& other) noexcept;
  ListenSocket& operator=(ListenSocket&& other) noexcept;
  ListenSocket(const ListenSocket&) = delete;
  ListenSocket& operator=(const ListenSocket&) = delete;
  ~ListenSocket();

  int fd() const { return fd_; }
  int family() const { return family_; }  ///< AF_INET or AF_INET6
  std::uint16_t port() const { return port_; }
  /// The bound address as text: "127.0.0.1", "::" ...
  const std::string& address() const { return address_; }
  /// Gives up ownership; returns the fd.
  int Release();

 private:
  ListenSocket(int fd, int family, std::uint16_t port, std::string address);

  int fd_ = -1;
  int family_ = 0;
  std::uint16_t port_ = 0;
  std::string address_;
};

/// TCP keepalive and TCP_USER_TIMEOUT for a long-lived connection: a peer host that vanished
/// (no FIN, no RST: powered off, cable pulled) is noticed within about `user_timeout`, where
/// the kernel alone would retransmit for many minutes.  A peer whose process is stopped or
/// starved is not: its kernel still answers.
struct TcpKeepAlive {
  std::chrono::seconds idle{2};
  std::chrono::seconds interval{1};
  int probes = 3;
  std::chrono::milliseconds user_timeout{5000};
};

/// Sets `keepalive` on the TCP socket `fd`; best effort (a failing option is ignored).
void SetTcpKeepAlive(int fd, const TcpKeepAlive& keepalive);

}  // namespace gculaunch::rendezvous
