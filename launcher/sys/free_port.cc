#include "launcher/sys/free_port.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "launcher/sys/unique_fd.h"

namespace gculaunch::sys {
namespace {

int BoundPort(int family) {
  UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return -1;
  sockaddr_storage addr{};
  socklen_t len;
  if (family == AF_INET6) {
    int off = 0;  // dual-stack: the port must be free for IPv4 too
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&addr);
    a6->sin6_family = AF_INET6;
    a6->sin6_addr = in6addr_any;
    len = sizeof(sockaddr_in6);
  } else {
    auto* a4 = reinterpret_cast<sockaddr_in*>(&addr);
    a4->sin_family = AF_INET;
    a4->sin_addr.s_addr = htonl(INADDR_ANY);
    len = sizeof(sockaddr_in);
  }
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) return -1;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  return family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                            : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

}  // namespace

Result<int> PickFreePort() {
  int port = BoundPort(AF_INET6);
  if (port <= 0) port = BoundPort(AF_INET);
  if (port <= 0) {
    return SysError("cannot find a free TCP port for the ranks' store", errno,
                    "pass --master-port PORT");
  }
  return port;
}

}  // namespace gculaunch::sys
