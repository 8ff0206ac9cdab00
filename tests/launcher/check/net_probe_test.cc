#include "launcher/check/net_probe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>

namespace gculaunch {
namespace {

// A TCP listener on 127.0.0.1 at a port the kernel picks.
class Listener {
 public:
  Listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    REQUIRE(::listen(fd_, 4) == 0);
    socklen_t len = sizeof(addr);
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
  }
  ~Listener() { Close(); }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST_CASE("net probe: numeric and local names resolve", "[net_probe]") {
  LocalNetworkProbe net;
  auto numeric = net.Resolve("127.0.0.1");
  REQUIRE(numeric.ok());
  CHECK(*numeric == std::vector<std::string>{"127.0.0.1"});
  auto v6 = net.Resolve("::1");
  REQUIRE(v6.ok());
  CHECK(*v6 == std::vector<std::string>{"::1"});
}

TEST_CASE("net probe: a port with a listener is in use, a closed one is free", "[net_probe]") {
  LocalNetworkProbe net;
  Listener listener;
  Status busy = net.CanListen(listener.port());
  REQUIRE_FALSE(busy.ok());
  CHECK(busy.error().what == "Address already in use");
  listener.Close();
  CHECK(net.CanListen(listener.port()).ok());
}

TEST_CASE("net probe: connect succeeds to a listener and is refused without one", "[net_probe]") {
  LocalNetworkProbe net;
  Listener listener;
  const ConnectOutcome connected = net.Connect("127.0.0.1", listener.port(), 5);
  CHECK(connected.kind == ConnectOutcome::Kind::kConnected);
  CHECK(connected.address == "127.0.0.1");
  listener.Close();
  const ConnectOutcome refused = net.Connect("127.0.0.1", listener.port(), 5);
  CHECK(refused.kind == ConnectOutcome::Kind::kRefused);
  CHECK(refused.error == "Connection refused");
}

}  // namespace
}  // namespace gculaunch
