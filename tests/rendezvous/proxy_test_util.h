// ProxyFixture: node 0's Server and a store Proxy (rendezvous/proxy.h) in front of it, both on
// one background io thread, for the socket-level tests of the proxy (proxy_test.cc) and the
// trace replay through it (trace_replay_test.cc).
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <memory>
#include <mutex>
#include <string>

#include "rendezvous/proxy.h"
#include "tests/rendezvous/server_test_util.h"

namespace gculaunch::rendezvous::testing {

// A Server (node 0) and a Proxy in front of it, both on the fixture's io thread.
class ProxyFixture {
 public:
  explicit ProxyFixture(ServerOptions server_options = {}, std::string secret = "",
                        bool wait_connected = true)
      : node0(std::move(server_options)), work_(node0.io().get_executor()) {
    sink_ = std::make_shared<CaptureSink>();
    log_ = std::make_unique<spdlog::logger>("proxy-test", sink_);
    log_->set_level(spdlog::level::debug);
    auto listener = ListenSocket::Bind("127.0.0.1", 0);
    REQUIRE(listener.ok());
    ProxyOptions options;
    options.upstream_host = "127.0.0.1";
    options.upstream_port = node0.port();
    options.secret = std::move(secret);
    options.connect_timeout = std::chrono::seconds(10);
    options.on_lost = [this](const std::string& why) {
      std::lock_guard<std::mutex> lock(mu_);
      lost_ = why;
    };
    node0.OnIo([&] {
      proxy_ = std::make_unique<Proxy>(node0.io(), std::move(*listener), std::move(options), *log_);
      return 0;
    });
    if (wait_connected) REQUIRE(log().WaitFor({"over one connection"}));
  }
  ~ProxyFixture() {
    node0.OnIo([&] {
      proxy_.reset();
      return 0;
    });
    work_.reset();
  }
  std::uint16_t port() {
    return node0.OnIo([&] { return proxy_->port(); });
  }
  CaptureSink& log() { return *sink_; }
  std::size_t node0_sessions() {
    return node0.OnIo([&] { return node0.server().num_sessions(); });
  }
  std::size_t ranks() {
    return node0.OnIo([&] { return proxy_->num_connections(); });
  }
  /// This node's gculaunch ends: the proxy and its upstream go.
  void StopProxy() {
    node0.OnIo([&] {
      proxy_.reset();
      return 0;
    });
  }
  std::string lost() {
    node0.OnIo([] { return 0; });  // on_lost is posted: let it run first
    std::lock_guard<std::mutex> lock(mu_);
    return lost_;
  }

  ServerFixture node0;

 private:
  // Keeps the io thread running after node 0's store stopped (a lost upstream).
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::shared_ptr<CaptureSink> sink_;
  std::unique_ptr<spdlog::logger> log_;
  std::unique_ptr<Proxy> proxy_;
  std::mutex mu_;
  std::string lost_;
};

}  // namespace gculaunch::rendezvous::testing
