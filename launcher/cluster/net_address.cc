#include "launcher/cluster/net_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <vector>

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

std::size_t BytesWaiting(int fd) {
  int waiting = 0;
  if (fd < 0 || ::ioctl(fd, FIONREAD, &waiting) != 0 || waiting < 0) return 0;
  return static_cast<std::size_t>(waiting);
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

namespace {

struct Resolved {
  std::vector<std::string> addresses;
  std::string canonical;  ///< getaddrinfo's AI_CANONNAME, if any
};

Resolved Resolve(const std::string& host) {
  Resolved out;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_CANONNAME;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return out;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_canonname != nullptr && out.canonical.empty()) out.canonical = a->ai_canonname;
    if (auto text = AddressText(a->ai_addr, a->ai_addrlen); text.ok()) {
      out.addresses.push_back(*text);
    }
  }
  ::freeaddrinfo(found);
  return out;
}

bool IsLoopbackLiteral(const std::string& host) {
  in_addr v4{};
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return ::inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

bool IsAddressLiteral(const std::string& host) {
  unsigned char buffer[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, host.c_str(), buffer) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), buffer) == 1;
}

// Address text -> interface name, for every interface that other hosts can reach us on.
std::map<std::string, std::string> InterfaceAddresses() {
  std::map<std::string, std::string> mine;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return mine;
  for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    const int family = a->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    // A dummy device's addresses (kube-ipvs0's service addresses) exist on every node alike.
    const unsigned flags = a->ifa_flags;
    if ((flags & IFF_NOARP) != 0 && (flags & (IFF_POINTOPOINT | IFF_LOOPBACK)) == 0) continue;
    const socklen_t length = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    if (auto text = AddressText(a->ifa_addr, length); text.ok()) mine.emplace(*text, a->ifa_name);
  }
  ::freeifaddrs(list);
  return mine;
}

}  // namespace

HostMatch MatchThisHost(const std::string& endpoint_host) {
  const std::string host =
      endpoint_host.size() > 2 && endpoint_host.front() == '[' && endpoint_host.back() == ']'
          ? endpoint_host.substr(1, endpoint_host.size() - 2)
          : endpoint_host;
  if (host == "localhost") return {true, "localhost is this host"};
  if (IsLoopbackLiteral(host)) return {true, host + " is a loopback address"};
  char name[256] = {};
  const std::string self = ::gethostname(name, sizeof name - 1) == 0 ? name : "";
  if (!self.empty() && host == self) return {true, host + " is this host's name"};
  const Resolved own = self.empty() ? Resolved{} : Resolve(self);
  if (!own.canonical.empty() && host == own.canonical) {
    return {true, host + " is this host's canonical name"};
  }
  if (IsAddressLiteral(host) &&
      std::find(own.addresses.begin(), own.addresses.end(), host) != own.addresses.end()) {
    return {true, host + " is an address this host's name (" + self + ") resolves to"};
  }
  // gculaunch's wider rule: the endpoint reaches one of this host's interfaces.
  const std::map<std::string, std::string> mine = InterfaceAddresses();
  for (const std::string& address : Resolve(host).addresses) {
    auto it = mine.find(address);
    if (it == mine.end()) continue;
    return {true, (address == host ? host : host + " resolves to " + address + ", which") +
                      " is an address of interface " + it->second};
  }
  return {false, host + " is not localhost, a loopback address, this host's name (" + self +
                     ") or an address of its interfaces"};
}

}  // namespace gculaunch
