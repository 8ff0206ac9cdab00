// AcceptBackoff: what a listener does when accept() fails (EMFILE, ENFILE, ...).
//
// The connection that could not be accepted stays in the backlog, so accepting again at
// once fails again: a loop that re-arms at once spins.  Instead the listener waits `delay`
// before it tries again, and says so once per episode (not once per refused connection)
// through `warn`.  The store's server does the same on its own (rendezvous/server.cc).
//
// Thread safety: the io_context's thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <utility>

namespace gculaunch {

class AcceptBackoff {
 public:
  using Warn = std::function<void(const std::string&)>;

  AcceptBackoff(boost::asio::io_context& io, std::string what)
      : timer_(io), what_(std::move(what)) {}

  void set_warn(Warn warn) { warn_ = std::move(warn); }

  /// accept() failed with `reason`: `retry` runs after the delay.
  void Failed(const std::string& reason, std::function<void()> retry) {
    if (!logged_ && warn_) {
      warn_(what_ + " cannot accept connections: " + reason + "; retrying every " +
            std::to_string(kDelay.count()) + " ms (raise the open-file limit, e.g. ulimit -n)");
    }
    logged_ = true;
    timer_.expires_after(kDelay);
    timer_.async_wait([retry = std::move(retry)](const boost::system::error_code& ec) {
      if (!ec) retry();
    });
  }
  /// A connection was accepted: the next failure is a new episode.
  void Succeeded() { logged_ = false; }
  void Cancel() { timer_.cancel(); }

  static constexpr std::chrono::milliseconds kDelay{100};

 private:
  boost::asio::steady_timer timer_;
  std::string what_;
  Warn warn_;
  bool logged_ = false;
};

}  // namespace gculaunch
