// Test helpers for the socket-level tests: a log sink that captures lines, a blocking
// loopback client with hang guards, and a fixture that runs a Server's io_context on a
// background thread.  Waiting is always for a condition (a log line, a reply, a future);
// the timeouts below are hang guards that turn a bug into a failure, never synchronization.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/server.h"
#include "tests/rendezvous/decode_util.h"

namespace gculaunch::rendezvous::testing {

inline constexpr auto kHangGuard = std::chrono::seconds(20);

/// A request's bytes in either dialect, and the bytes a v2 client opens its connection with.
inline std::string V1(const Request& r) { return Encode(Dialect::kV1, r); }
inline std::string V2(const Request& r) { return Encode(Dialect::kV2, r); }
inline const std::string kHandshake = FromHex("00cef7853c");

/// Keeps every formatted log line; lets a test wait for one that contains some text.
class CaptureSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::vector<std::string> Lines() {
    std::lock_guard<std::mutex> lock(mutex_);
    return lines_;
  }
  /// Waits (hang guard: kHangGuard) for a line containing every one of `parts`.
  bool WaitFor(const std::vector<std::string>& parts) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, kHangGuard, [&] { return FindLocked(parts) >= 0; });
  }
  bool Contains(const std::vector<std::string>& parts) {
    std::lock_guard<std::mutex> lock(mutex_);
    return FindLocked(parts) >= 0;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    lines_.emplace_back(msg.payload.data(), msg.payload.size());
    cv_.notify_all();
  }
  void flush_() override {}

 private:
  int FindLocked(const std::vector<std::string>& parts) {
    for (std::size_t i = 0; i < lines_.size(); ++i) {
      bool all = true;
      for (const auto& p : parts) all = all && lines_[i].find(p) != std::string::npos;
      if (all) return static_cast<int>(i);
    }
    return -1;
  }
  std::vector<std::string> lines_;
  std::condition_variable cv_;
};

/// A blocking IPv4 loopback client with receive/send timeouts as hang guards.
class RawClient {
 public:
  explicit RawClient(std::uint16_t port, bool connect_now = true) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    timeval tv{static_cast<time_t>(kHangGuard.count()), 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    port_ = port;
    if (connect_now) Connect();
  }
  ~RawClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  void Connect() {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port_);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  }

  /// "127.0.0.1:<local port>", as the server logs this client.
  std::string LocalName() const {
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    return "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  }

  void Send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      REQUIRE(n > 0);
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
  }

  /// Reads exactly n bytes (fails on EOF or on the hang guard).
  std::string Read(std::size_t n) {
    std::string out(n, '\0');
    std::size_t got = 0;
    while (got < n) {
      const ssize_t r = ::recv(fd_, out.data() + got, n - got, 0);
      if (r <= 0) {
        FAIL("expected " << n << " bytes, got " << got
                         << (r == 0 ? " then EOF" : " then an error"));
      }
      got += static_cast<std::size_t>(r);
    }
    return out;
  }

  /// True if the server closed the connection (reads until EOF; fails on data or timeout).
  bool ReadsEof() {
    char c;
    const ssize_t r = ::recv(fd_, &c, 1, 0);
    return r == 0 || (r < 0 && errno == ECONNRESET);
  }

  /// True if nothing is waiting to be read right now.
  bool NothingPending() {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, 0) == 0;
  }

  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

/// A Server on 127.0.0.1:0 whose io_context runs on a background thread.
class ServerFixture {
 public:
  explicit ServerFixture(ServerOptions options = {}) {
    sink_ = std::make_shared<CaptureSink>();
    log_ = std::make_unique<spdlog::logger>("store-test", sink_);
    log_->set_level(spdlog::level::debug);
    options.request_observer = [this](ConnId id, const Request& r) {
      std::lock_guard<std::mutex> lock(mu_);
      seen_.emplace_back(id, r.op);
      cv_.notify_all();
    };
    auto listener = ListenSocket::Bind("127.0.0.1", 0);
    REQUIRE(listener.ok());
    server_ = std::make_unique<Server>(io_, std::move(*listener), std::move(options), *log_);
    thread_ = std::thread([this] {
      io_.run();
      done_.set_value();
    });
  }
  ~ServerFixture() {
    if (thread_.joinable()) {
      boost::asio::post(io_, [this] { server_->Stop(); });
      if (done_future_.wait_for(kHangGuard) != std::future_status::ready) io_.stop();
      thread_.join();
    }
    server_.reset();
  }

  std::uint16_t port() const { return server_->port(); }
  Server& server() { return *server_; }
  CaptureSink& log() { return *sink_; }
  boost::asio::io_context& io() { return io_; }

  /// Runs f on the io thread and returns its result (hang guard: kHangGuard).
  template <typename F>
  auto OnIo(F f) -> decltype(f()) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto result = task.get_future();
    boost::asio::post(io_, [&task] { task(); });
    REQUIRE(result.wait_for(kHangGuard) == std::future_status::ready);
    return result.get();
  }

  /// Waits until the server has handled a request of kind `op` (the n-th one, 1-based) and
  /// returns its connection id.
  ConnId WaitForRequest(Op op, int nth = 1) {
    ConnId id = 0;
    std::unique_lock<std::mutex> lock(mu_);
    const bool ok = cv_.wait_for(lock, kHangGuard, [&] {
      int count = 0;
      for (const auto& [conn, o] : seen_) {
        if (o == op && ++count == nth) {
          id = conn;
          return true;
        }
      }
      return false;
    });
    lock.unlock();
    REQUIRE(ok);
    OnIo([] { return 0; });  // the observer runs before the store: let the handler finish
    return id;
  }

  /// Requests the server has handled so far, on every connection and proxied stream.
  std::size_t RequestsSeen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_.size();
  }

  /// Waits until the server has handled `n` requests in all (hang guard: kHangGuard; false
  /// then), and the handler of the last one has finished.
  bool WaitForRequests(std::size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    const bool ok = cv_.wait_for(lock, kHangGuard, [&] { return seen_.size() >= n; });
    lock.unlock();
    OnIo([] { return 0; });
    return ok;
  }

  /// Waits for io_context::run() to return (after a Stop); true if it did.
  bool WaitStopped() {
    const bool ok = done_future_.wait_for(kHangGuard) == std::future_status::ready;
    if (!ok) io_.stop();
    thread_.join();
    return ok;
  }

 private:
  boost::asio::io_context io_;
  std::shared_ptr<CaptureSink> sink_;
  std::unique_ptr<spdlog::logger> log_;
  std::unique_ptr<Server> server_;
  std::promise<void> done_;
  std::future<void> done_future_ = done_.get_future();
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<ConnId, Op>> seen_;
};

}  // namespace gculaunch::rendezvous::testing
