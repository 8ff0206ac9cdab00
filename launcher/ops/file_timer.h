// FileTimerServer: torchrun's TORCHELASTIC_ENABLE_FILE_TIMER watchdog, served by gculaunch.
//
// torch's contract (torch/distributed/elastic/timer/file_based_local_timer.py, and
// LocalElasticAgent._setup_local_watchdog): when the launcher's environment has
// TORCHELASTIC_ENABLE_FILE_TIMER=1, the launcher creates a FIFO (TORCHELASTIC_TIMER_FILE
// if set, else a path of its own) and gives every rank TORCHELASTIC_TIMER_FILE.  A rank's
// FileTimerClient writes one JSON request per line (at most PIPE_BUF bytes, so lines from
// several writers never interleave):
//   {"version": 1, "pid": 1234, "scope_id": "step", "expiration_time": 1700000000.5,
//    "signal": 9}
// expiration_time is unix seconds; a negative one releases the timer (pid, scope_id).  When
// a timer expires, the server sends its signal (if > 0) to the pid and forgets every timer of
// that pid.  torchrun's server polls every max_interval (up to 10 s late); this one checks
// every 100 ms.
//
// Who may be signalled is not this class's business: the Reaper decides (Launch only signals
// a rank or a process in a rank's group, see launcher/app/launch.cc).
//
// Ownership: owns the FIFO (created at Start, removed by the destructor) and its descriptor,
// opened read-write so that it never reports end of file when the last writer closes.
// Thread safety: io_context thread only.
#pragma once

#include <sys/types.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "base/error.h"
#include "base/lifetime.h"

namespace gculaunch {

struct FileTimerRequest {
  pid_t pid = 0;
  std::string scope_id;
  double expiration_time = 0;  ///< unix seconds; < 0: release
  int signal = 0;
};

/// One request line; nullopt when it is not a valid request (not JSON, a field missing or
/// of the wrong type, a pid <= 0, a signal outside 0..64).
std::optional<FileTimerRequest> ParseFileTimerRequest(std::string_view line);

/// The timers, pure: requests in, expired timers out.
class FileTimerTable {
 public:
  /// The most timers held at once: a rank that acquires timers under ever new scope names
  /// cannot grow gculaunch without end (each may hold a 4 KiB name).  torch's ranks hold one
  /// per scope they are inside, a handful each.
  static constexpr size_t kMaxTimers = 1024;

  /// Acquires, renews or (expiration_time < 0) releases the timer (pid, scope_id).  False
  /// when a new timer was refused because kMaxTimers are held.
  bool Apply(const FileTimerRequest& request);
  /// The pids with a timer expired at `now` (unix seconds), each with its earliest expired
  /// timer that has a signal > 0 (torchrun's choice); every timer of those pids is removed,
  /// also when none has a signal (they are then not reaped, as in torchrun).
  std::map<pid_t, FileTimerRequest> TakeExpired(double now);
  size_t size() const { return timers_.size(); }

 private:
  std::map<std::pair<pid_t, std::string>, FileTimerRequest> timers_;
};

class FileTimerServer {
 public:
  /// Called for each expired timer with a signal: the pid, the signal, the scope.
  using Reaper = std::function<void(const FileTimerRequest& expired)>;

  /// Creates the FIFO at `path` (only a FIFO of this user left there by an earlier run is
  /// replaced; anything else is an error) and starts reading it.  The descriptor is opened
  /// without following a link and checked to be that FIFO.  The error names the path and
  /// the reason.
  static Result<std::unique_ptr<FileTimerServer>> Start(boost::asio::io_context& io,
                                                        const std::string& path, Reaper reaper);
  ~FileTimerServer();
  FileTimerServer(const FileTimerServer&) = delete;
  FileTimerServer& operator=(const FileTimerServer&) = delete;

  const FileTimerTable& table() const { return table_; }
  /// Where the one warning about a full timer table goes; none: nowhere.
  void set_warn(std::function<void(const std::string&)> warn) { warn_ = std::move(warn); }

 private:
  FileTimerServer(boost::asio::io_context& io, std::string path, int fd, Reaper reaper);
  void Read();
  void Accept(const FileTimerRequest& request);
  void Check();

  std::string path_;
  boost::asio::posix::stream_descriptor fifo_;
  boost::asio::steady_timer timer_;
  Reaper reaper_;
  FileTimerTable table_;
  std::function<void(const std::string&)> warn_;
  bool warned_full_ = false;
  std::string partial_;
  std::array<char, 4096> buffer_{};
  LifetimeGuard lifetime_;  ///< last member
};

}  // namespace gculaunch
