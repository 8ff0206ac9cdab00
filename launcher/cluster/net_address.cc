#include "launcher/cluster/net_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

namespace gculaunch {

bool IsIpv6Literal(const std::string& host) { return host.find(':') != std::string::npos; }

std::string FormatEndpoint(const std::string& host, int port) {
  if (IsIpv6Literal(host)) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

Result<std::string> AddressText(const sockaddr* address, socklen_t length) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address->sa_family == AF_INET && length >= static_cast<socklen_t>(sizeof(sockaddr_in))) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(address);
    ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    return std::string(text);
  }
  if (address->sa_family == AF_INET6 && length >= static_cast<socklen_t>(sizeof(sockaddr_in6))) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(address);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      ::inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], text, sizeof text);
      return std::string(text);
    }
    ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
    std::string out = text;
    if (in6->sin6_scope_id != 0) {
      char name[IF_NAMESIZE] = {};
      out += '%';
      out += ::if_indextoname(in6->sin6_scope_id, name) != nullptr
                 ? std::string(name)
                 : std::to_string(in6->sin6_scope_id);
    }
    return out;
  }
  return Error{"address family " + std::to_string(address->sa_family) + " is neither IPv4 nor IPv6",
               ""};
}

Result<std::string> LocalAddressOf(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return Error{std::string("getsockname failed: ") + std::strerror(errno), ""};
  }
  return AddressText(reinterpret_cast<const sockaddr*>(&ss), len);
}

Result<std::string> RouteAddressTo(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_family = AF_UNSPEC;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return Error{"cannot resolve " + host + ": " + ::gai_strerror(rc),
                 "check MASTER_ADDR (a host name must resolve on every node)"};
  }
  std::string last = "no address";
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      last = std::strerror(errno);
      continue;
    }
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      last = std::strerror(errno);
      ::close(fd);
      continue;
    }
    auto text = LocalAddressOf(fd);
    ::close(fd);
    if (text.ok()) {
      ::freeaddrinfo(found);
      return text;
    }
    last = text.error().what;
  }
  ::freeaddrinfo(found);
  return Error{"no route from this host to " + host + ": " + last,
               "check MASTER_ADDR and this node's network configuration"};
}

}  // namespace gculaunch

namespace gculaunch {

bool NamesThisHost(const std::string& host) {
  char name[256] = {};
  if (host == "localhost" || (::gethostname(name, sizeof name - 1) == 0 && host == name)) {
    return true;
  }
  std::set<std::string> mine;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return false;
  for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    const int family = a->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    const socklen_t length = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    if (auto text = AddressText(a->ifa_addr, length); text.ok()) mine.insert(*text);
  }
  ::freeifaddrs(list);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string bare = host.size() > 2 && host.front() == '[' && host.back() == ']'
                               ? host.substr(1, host.size() - 2)
                               : host;
  if (::getaddrinfo(bare.c_str(), nullptr, &hints, &found) != 0) return false;
  bool local = false;
  for (const addrinfo* a = found; a != nullptr && !local; a = a->ai_next) {
    auto text = AddressText(a->ai_addr, a->ai_addrlen);
    local = text.ok() && mine.count(*text) != 0;
  }
  ::freeaddrinfo(found);
  return local;
}

}  // namespace gculaunch
