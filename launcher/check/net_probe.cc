#include "launcher/check/net_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace gculaunch {
namespace {

class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

std::string Numeric(const sockaddr* addr, socklen_t len) {
  char host[NI_MAXHOST] = "";
  if (::getnameinfo(addr, len, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) != 0) return "?";
  return host;
}

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list != nullptr) ::freeaddrinfo(list);
  }
};

int Lookup(const std::string& host, const char* service, AddrInfo& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  return ::getaddrinfo(host.c_str(), service, &hints, &out.list);
}

}  // namespace

Result<std::vector<std::string>> LocalNetworkProbe::Resolve(const std::string& host) const {
  AddrInfo info;
  const int rc = Lookup(host, nullptr, info);
  if (rc != 0) return Error{rc == EAI_SYSTEM ? std::strerror(errno) : ::gai_strerror(rc), ""};
  std::vector<std::string> addresses;
  for (const addrinfo* a = info.list; a != nullptr; a = a->ai_next) {
    const std::string text = Numeric(a->ai_addr, a->ai_addrlen);
    if (std::find(addresses.begin(), addresses.end(), text) == addresses.end()) {
      addresses.push_back(text);
    }
  }
  return addresses;
}

Status LocalNetworkProbe::CanListen(int port) const {
  // [::] with IPV6_V6ONLY off covers IPv4 too; a host without IPv6 falls back
  // to 0.0.0.0.
  Socket v6(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int on = 1;
  const int off = 0;
  if (v6.fd() >= 0) {
    ::setsockopt(v6.fd(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    ::setsockopt(v6.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    addr.sin6_port = htons(static_cast<uint16_t>(port));
    if (::bind(v6.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) return OkStatus();
    if (errno != EAFNOSUPPORT && errno != EADDRNOTAVAIL) return Error{std::strerror(errno), ""};
  }
  Socket v4(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (v4.fd() < 0) return Error{std::strerror(errno), ""};
  ::setsockopt(v4.fd(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(v4.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) return OkStatus();
  return Error{std::strerror(errno), ""};
}

ConnectOutcome LocalNetworkProbe::Connect(const std::string& host, int port,
                                          double timeout_s) const {
  ConnectOutcome outcome;
  AddrInfo info;
  const std::string service = std::to_string(port);
  const int rc = Lookup(host, service.c_str(), info);
  if (rc != 0) {
    outcome.kind = ConnectOutcome::Kind::kUnreachable;
    outcome.error = rc == EAI_SYSTEM ? std::strerror(errno) : ::gai_strerror(rc);
    return outcome;
  }
  outcome.kind = ConnectOutcome::Kind::kUnreachable;
  outcome.error = "no address";
  for (const addrinfo* a = info.list; a != nullptr; a = a->ai_next) {
    outcome.address = Numeric(a->ai_addr, a->ai_addrlen);
    Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (s.fd() < 0) {
      outcome.kind = ConnectOutcome::Kind::kUnreachable;
      outcome.error = std::strerror(errno);
      continue;
    }
    int error = 0;
    if (::connect(s.fd(), a->ai_addr, a->ai_addrlen) != 0) {
      error = errno;
      if (error == EINPROGRESS) {
        pollfd p{s.fd(), POLLOUT, 0};
        int ready = 0;
        do {
          ready = ::poll(&p, 1, static_cast<int>(timeout_s * 1000));
        } while (ready < 0 && errno == EINTR);
        if (ready == 0) {
          outcome.kind = ConnectOutcome::Kind::kTimedOut;
          outcome.error = "no answer";
          continue;
        }
        socklen_t len = sizeof(error);
        ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &error, &len);
      }
    }
    if (error == 0) {
      outcome.kind = ConnectOutcome::Kind::kConnected;
      outcome.error.clear();
      return outcome;
    }
    outcome.kind =
        error == ECONNREFUSED ? ConnectOutcome::Kind::kRefused : ConnectOutcome::Kind::kUnreachable;
    outcome.error = std::strerror(error);
  }
  return outcome;
}

}  // namespace gculaunch
