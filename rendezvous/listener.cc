#include "rendezvous/listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace gculaunch::rendezvous {
namespace {

std::string Endpoint(const std::string& host, std::uint16_t port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return (host.empty() ? std::string("*") : host) + ":" + std::to_string(port);
}

std::string HintFor(int err, std::uint16_t port) {
  switch (err) {
    case EADDRINUSE:
      return "another process is using port " + std::to_string(port) +
             "; choose another --port, or 0 for a free one";
    case EACCES:
      return "ports below 1024 need privileges; choose a port above 1024";
    case EADDRNOTAVAIL:
      return "the address is not one of this machine's; use 127.0.0.1, or an empty host for "
             "all interfaces";
    default:
      return "";
  }
}

// Address text and port of a bound socket.
bool Describe(int fd, int* family, std::uint16_t* port, std::string* address) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return false;
  char text[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    *port = ntohs(in->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
    *port = ntohs(in6->sin6_port);
  } else {
    return false;
  }
  *family = ss.ss_family;
  *address = text;
  return true;
}

struct Attempt {
  int fd = -1;
  int err = 0;
};

// One socket() + bind() + listen() on one address.
Attempt BindOne(int family, const sockaddr* addr, socklen_t len, bool dual_stack, int backlog) {
  Attempt a;
  a.fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (a.fd < 0) {
    a.err = errno;
    return a;
  }
  const int one = 1;
  const int zero = 0;
  ::setsockopt(a.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (family == AF_INET6 && dual_stack) {
    ::setsockopt(a.fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  }
  if (::bind(a.fd, addr, len) != 0 || ::listen(a.fd, std::max(backlog, SOMAXCONN)) != 0) {
    a.err = errno;
    ::close(a.fd);
    a.fd = -1;
  }
  return a;
}

}  // namespace

ListenSocket::ListenSocket(int fd, int family, std::uint16_t port, std::string address)
    : fd_(fd), family_(family), port_(port), address_(std::move(address)) {}

ListenSocket::ListenSocket(ListenSocket&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      family_(other.family_),
      port_(other.port_),
      address_(std::move(other.address_)) {}

ListenSocket& ListenSocket::operator=(ListenSocket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    family_ = other.family_;
    port_ = other.port_;
    address_ = std::move(other.address_);
  }
  return *this;
}

ListenSocket::~ListenSocket() {
  if (fd_ >= 0) ::close(fd_);
}

int ListenSocket::Release() { return std::exchange(fd_, -1); }

Result<ListenSocket> ListenSocket::Bind(const std::string& host, std::uint16_t port, int backlog,
                                        int* bind_errno) {
  if (bind_errno != nullptr) *bind_errno = 0;
  Attempt got;
  const bool all = host.empty() || host == "*";
  if (all || host == "::") {
    sockaddr_in6 any6{};
    any6.sin6_family = AF_INET6;
    any6.sin6_addr = in6addr_any;
    any6.sin6_port = htons(port);
    got = BindOne(AF_INET6, reinterpret_cast<sockaddr*>(&any6), sizeof any6, true, backlog);
    if (got.fd < 0 && all && got.err != EADDRINUSE && got.err != EACCES) {
      sockaddr_in any4{};
      any4.sin_family = AF_INET;
      any4.sin_addr.s_addr = htonl(INADDR_ANY);
      any4.sin_port = htons(port);
      got = BindOne(AF_INET, reinterpret_cast<sockaddr*>(&any4), sizeof any4, false, backlog);
    }
  } else {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* list = nullptr;
    const std::string service = std::to_string(port);
    const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &list);
    if (rc != 0) {
      return Error{"cannot listen on " + Endpoint(host, port) + ": cannot resolve '" + host +
                       "': " + ::gai_strerror(rc),
                   "give a numeric address such as 127.0.0.1, or an empty host for all "
                   "interfaces"};
    }
    got.err = EADDRNOTAVAIL;
    for (addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
      got = BindOne(ai->ai_family, ai->ai_addr, ai->ai_addrlen, false, backlog);
      if (got.fd >= 0) break;
    }
    ::freeaddrinfo(list);
  }
  if (got.fd < 0) {
    if (bind_errno != nullptr) *bind_errno = got.err;
    return Error{"cannot listen on " + Endpoint(host, port) + ": " + std::strerror(got.err),
                 HintFor(got.err, port)};
  }
  int family = 0;
  std::uint16_t bound_port = 0;
  std::string address;
  if (!Describe(got.fd, &family, &bound_port, &address)) {
    const int err = errno;
    ::close(got.fd);
    return Error{"cannot read the address of the socket bound to " + Endpoint(host, port) + ": " +
                     std::strerror(err),
                 ""};
  }
  return ListenSocket(got.fd, family, bound_port, std::move(address));
}

Result<ListenSocket> ListenSocket::AdoptForTest(int fd, int backlog) {
  auto fail = [fd](const std::string& what, const std::string& hint) -> Result<ListenSocket> {
    ::close(fd);
    return Error{what, hint};
  };
  const std::string name = "fd " + std::to_string(fd);
  // Close-on-exec first of all: nothing must inherit it.
  const int fd_flags = ::fcntl(fd, F_GETFD);
  if (fd_flags < 0 || ::fcntl(fd, F_SETFD, fd_flags | FD_CLOEXEC) != 0) {
    return fail(
        "cannot adopt " + name + " as the store's listening socket: " + std::strerror(errno),
        "pass an open socket");
  }
  int type = 0;
  socklen_t len = sizeof type;
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) {
    return fail("cannot adopt " + name + ": it is not a TCP socket", "pass a bound TCP socket");
  }
  int family = 0;
  std::uint16_t port = 0;
  std::string address;
  if (!Describe(fd, &family, &port, &address) || port == 0) {
    return fail("cannot adopt " + name + ": it is not bound to an IPv4 or IPv6 port",
                "bind it (port 0 picks a free one) before handing it over");
  }
  const int status_flags = ::fcntl(fd, F_GETFL);
  if (status_flags < 0 || ::fcntl(fd, F_SETFL, status_flags | O_NONBLOCK) != 0) {
    return fail("cannot make " + name + " non-blocking: " + std::strerror(errno), "");
  }
  int listening = 0;
  len = sizeof listening;
  if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) {
    if (::listen(fd, std::max(backlog, SOMAXCONN)) != 0) {
      return fail("cannot listen on adopted " + name + " (port " + std::to_string(port) +
                      "): " + std::strerror(errno),
                  "");
    }
  }
  return ListenSocket(fd, family, port, std::move(address));
}

void SetTcpKeepAlive(int fd, const TcpKeepAlive& keepalive) {
  const int one = 1;
  const int idle = static_cast<int>(keepalive.idle.count());
  const int interval = static_cast<int>(keepalive.interval.count());
  const int probes = keepalive.probes;
  const auto user_timeout = static_cast<unsigned>(keepalive.user_timeout.count());
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes);
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
}

}  // namespace gculaunch::rendezvous
