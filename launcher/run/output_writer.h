// OutputWriter: the only code that writes rank output and gculaunch's own
// messages to the console and to log files.
//
// Writers on the io_context thread queue bytes and never block; one writer
// thread drains the queue with ordinary blocking write() calls, so a slow or
// stopped terminal stalls only that thread, never supervision or signal
// handling.  gculaunch's inherited stdout/stderr are written as they are
// (never switched to O_NONBLOCK: the shell shares those file descriptions);
// if someone else made them non-blocking, the writer waits with poll().
//
// The queue is bounded for rank output: when it holds more than
// `high_water` bytes, Write() returns false and the rank pipe readers pause
// (back-pressure: the ranks then block on their own full pipes).  When the
// writer has brought the queue below `low_water`, it calls `on_space` (from
// the writer thread; the callback must be thread-safe, e.g. asio::post).
// gculaunch's own messages (Urgent()) are always accepted.
//
// Each queued chunk is written with one write() per target; chunks are whole
// lines, and only this thread writes to gculaunch's stdout and stderr, so
// lines from different ranks are never torn or interleaved.
//
// A terminal shows progress bars live: a progress chunk (WriteProgress)
// redraws its owner's bar in place while the last line on that terminal is
// the owner's bar; any other chunk to the same terminal first ends the bar
// line ("\n"), except the owner's next line, which replaces the bar (its
// final state).  A redraw is cut to the terminal's width.
//
// A target whose write fails (EPIPE, EIO after a hang-up) is marked failed and
// its later output is dropped and counted.  A full disk (ENOSPC, EDQUOT, EFBIG)
// drops only what could not be written: later output is tried again, so a log
// file resumes once there is space.  For a log file (File()) the writer says so
// on the warnings target (set_warnings, gculaunch's stderr), once when the file
// starts losing output and once when it writes again, with the bytes lost.
//
// Lifetime: Finish() (or the destructor) stops the thread.  Targets are
// shared_ptrs so a log file stays open until its last queued bytes are written.
// Thread safety: Write/Urgent/congested are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/error.h"
#include "launcher/sys/unique_fd.h"

namespace gculaunch {

/// Where bytes go: an inherited descriptor (stdout, stderr) or an owned file.
class OutputTarget {
 public:
  /// Not owned: gculaunch's own stdout or stderr.
  static std::shared_ptr<OutputTarget> Borrowed(int fd, std::string name);
  /// A log file gculaunch opened (HeldDir::OpenFile); `name` for messages.
  static std::shared_ptr<OutputTarget> Owned(sys::UniqueFd fd, std::string name);
  /// Opens (creating or truncating, never through a symlink) `path` by name.
  static Result<std::shared_ptr<OutputTarget>> FileForTest(const std::string& path);

  int fd() const { return fd_; }
  const std::string& name() const { return name_; }
  /// A terminal (isatty when borrowed); progress bars are drawn live on it.
  bool terminal() const { return terminal_; }
  /// Both are the same terminal device (stdout and stderr of one shell).
  bool SameTerminal(const OutputTarget& other) const {
    return this == &other || (terminal_ && other.terminal_ && rdev_ == other.rdev_);
  }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  void MarkFailed() { failed_.store(true, std::memory_order_relaxed); }
  /// A log file gculaunch opened (Owned()), not an inherited descriptor.
  bool file() const { return owned_.get() >= 0; }

 private:
  friend class OutputWriter;
  OutputTarget(int fd, sys::UniqueFd owned, std::string name)
      : fd_(fd), owned_(std::move(owned)), name_(std::move(name)) {}
  int fd_;
  sys::UniqueFd owned_;
  std::string name_;
  bool terminal_ = false;
  uint64_t rdev_ = 0;
  std::atomic<bool> failed_{false};
  uint64_t lost_ = 0;  ///< writer thread only: bytes dropped since the last good write
};
using TargetPtr = std::shared_ptr<OutputTarget>;

class OutputWriter {
 public:
  struct Limits {
    size_t high_water = 1 << 20;   ///< pause rank readers above this many queued bytes
    size_t low_water = 256 << 10;  ///< resume them below this
  };

  OutputWriter(Limits limits, std::function<void()> on_space);
  ~OutputWriter();
  OutputWriter(const OutputWriter&) = delete;
  OutputWriter& operator=(const OutputWriter&) = delete;

  /// Queues rank output.  Returns false when the queue is now congested (the
  /// bytes were still accepted; the caller should stop reading until
  /// on_space runs).
  bool Write(const TargetPtr& target, std::string bytes, const void* owner = nullptr);
  /// Queues the latest state of `owner`'s progress bar (no newline) for a
  /// terminal target; see the class comment.  Returns as Write().
  bool WriteProgress(const TargetPtr& target, std::string bytes, const void* owner);
  /// Queues a message of gculaunch itself, regardless of congestion.
  void Urgent(const TargetPtr& target, std::string bytes);
  /// True while rank readers should stay paused.
  bool congested() const;
  /// Where the writer's own warnings about log files go (gculaunch's stderr); none: nowhere.
  void set_warnings(TargetPtr target);

  /// Waits until everything queued so far has been written (or dropped), at most `timeout`;
  /// false when bytes are still queued.  The writer keeps running.
  bool WaitDrained(std::chrono::milliseconds timeout);

  /// Waits until everything queued has been written or `timeout` passed,
  /// then stops the thread.  Returns false if bytes were left unwritten (a
  /// terminal that never drains must not keep gculaunch alive).
  bool Finish(std::chrono::milliseconds timeout);

  uint64_t bytes_written() const { return bytes_written_.load(); }
  uint64_t bytes_dropped() const { return bytes_dropped_.load(); }
  /// The part of bytes_dropped() that was meant for log files (a full disk).
  uint64_t log_bytes_dropped() const { return log_bytes_dropped_.load(); }

 private:
  struct Chunk {
    TargetPtr target;
    std::string bytes;
    const void* owner = nullptr;  ///< the rank stream that wrote it; null: gculaunch
    bool progress = false;        ///< a redraw of owner's progress bar
  };
  bool Queue(Chunk chunk, bool urgent);
  void Run();
  void ShapeForTerminal(Chunk& chunk);
  void WriteChunks(std::deque<Chunk>& chunks);
  void LostOutput(OutputTarget& target, int err, size_t bytes);
  void Warn(const std::string& line);

  const Limits limits_;
  const std::function<void()> on_space_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;     ///< new chunks or stop
  std::condition_variable drained_;  ///< queue became empty
  std::deque<Chunk> queue_;          // GUARDED_BY(mutex_)
  TargetPtr warnings_;               // GUARDED_BY(mutex_)
  size_t queued_bytes_ = 0;          // GUARDED_BY(mutex_): queued + being written
  bool congested_ = false;           // GUARDED_BY(mutex_)
  bool stopping_ = false;            // GUARDED_BY(mutex_)
  bool finished_ = false;            // only the owning thread
  TargetPtr bar_target_;             ///< writer thread only: the terminal line that is a bar
  const void* bar_owner_ = nullptr;  ///< writer thread only: whose bar it is
  std::atomic<uint64_t> bytes_written_{0};
  std::atomic<uint64_t> bytes_dropped_{0};
  std::atomic<uint64_t> log_bytes_dropped_{0};
  std::thread thread_;
};

}  // namespace gculaunch
