// GoChannel: gculaunch's end of a warm-rank standby's stdin, and the go sent through it.
//
// A standby's stdin is one end of a Unix stream socket pair (MakeGoSocketPair); gculaunch
// keeps the other end.  The go is the attempt's environment ("KEY=VALUE" items, each ended by
// a NUL byte) followed by end of file (shutdown(SHUT_WR)).  The standby's hook
// (launcher/frontend/python/warm_standby/sitecustomize.py) reads it to the end, makes it its
// environment and answers kGoConfirmation on the same socket before it runs the script.
// Closing the socket without a go dismisses the standby (it reads end of file, nothing else,
// and exits).
//
// Go() is a chain of non-blocking steps on the io_context: a write as far as the socket takes
// it, a wait until it takes more, the end of file, a wait for the answer; all within `bound`,
// counted from the call.  A standby that is stopped, traced, reads something else, or is dead
// fails the bound or the socket says so at once; the event loop never waits for it.
//
// Lifetime: owns the descriptor.  Destroying the GoChannel cancels a Go() in progress (its
// `done` never runs) and closes the socket.  The io_context must outlive it.
// Thread safety: the io_context's thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include "base/error.h"
#include "base/lifetime.h"
#include "launcher/sys/unique_fd.h"

namespace gculaunch::sys {

/// What a standby answers once it has taken its go.
inline constexpr std::string_view kGoConfirmation = "go\n";

/// A connected pair of close-on-exec Unix stream sockets: {gculaunch's end, the standby's
/// stdin}.
Result<std::pair<UniqueFd, UniqueFd>> MakeGoSocketPair();

/// One non-blocking write of what the socket takes of `data` (0: full now).  An error when
/// the peer is gone (EPIPE, ECONNRESET) or the write fails otherwise; never SIGPIPE.
Result<size_t> WriteSomeNow(int fd, std::string_view data);

/// One non-blocking read of at most `max` bytes: what was there (empty: nothing yet).  An
/// error at end of file or when the read fails.
Result<std::string> ReadSomeNow(int fd, size_t max);

class GoChannel {
 public:
  GoChannel(boost::asio::io_context& io, UniqueFd fd);
  ~GoChannel();
  GoChannel(const GoChannel&) = delete;
  GoChannel& operator=(const GoChannel&) = delete;

  /// Sends `message` and end of file, then waits for kGoConfirmation; `done` runs once, on the
  /// io_context (never inline): OkStatus, or an error saying what the standby did not do in
  /// `bound` ("did not confirm the go within 500 ms").  Call once.
  void Go(std::string message, std::chrono::milliseconds bound, std::function<void(Status)> done);
  /// Whether the confirmation is there, read now without waiting (for an exit that was
  /// reported before the answer was read).
  bool ConfirmedNow();

 private:
  void WriteMore();
  void AwaitAnswer();
  void ReadAnswer();
  void Finish(Status status);
  std::string Late() const;

  boost::asio::posix::stream_descriptor socket_;
  boost::asio::steady_timer deadline_;
  std::string message_;
  size_t written_ = 0;
  std::string answer_;
  std::chrono::milliseconds bound_{0};
  std::function<void(Status)> done_;
  LifetimeGuard lifetime_;  ///< last member: expires first
};

}  // namespace gculaunch::sys
