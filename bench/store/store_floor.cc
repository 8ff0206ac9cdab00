// store_floor: the calibration "server" of bench/store.py.  NOT a store.
//
// A bare epoll loop that answers every byte it receives with 8 zero bytes: exactly the
// reply a TCPStore gives to GETNUMKEYS (torch 1.x code 6) on an empty store.  Driven by
// `store_load ... numkeys R`, it shows what the kernel alone (loopback TCP receive + send,
// epoll, scheduling) costs per request on this machine, i.e. the floor under any TCPStore
// server's CPU per request.  Prints "listening on 127.0.0.1:PORT"; runs until killed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

int main() {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int one = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener, 65535) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::perror("store_floor");
    return 1;
  }
  std::printf("listening on 127.0.0.1:%d\n", ntohs(addr.sin_port));
  std::fflush(stdout);
  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listener;
  ::epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev);
  std::vector<epoll_event> events(256);
  std::vector<char> in(4096);
  const std::vector<char> zeros(8 * in.size(), 0);
  while (true) {
    const int n = ::epoll_wait(ep, events.data(), static_cast<int>(events.size()), -1);
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listener) {
        int conn;
        while ((conn = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
          ::setsockopt(conn, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          epoll_event e{};
          e.events = EPOLLIN;
          e.data.fd = conn;
          ::epoll_ctl(ep, EPOLL_CTL_ADD, conn, &e);
        }
        continue;
      }
      const ssize_t got = ::recv(fd, in.data(), in.size(), 0);
      if (got <= 0) {
        ::close(fd);
        continue;
      }
      (void)!::send(fd, zeros.data(), 8 * static_cast<std::size_t>(got), MSG_NOSIGNAL);
    }
  }
}
