// RankStream: reads one rank's stdout or stderr pipe and routes its bytes.
//
//   pipe --async read--> raw bytes --> log file (torchrun's stdout.log/stderr.log: full output)
//                           |
//                           +--> LineSplitter --> "[rank3]: line\n" --> console (if routed)
//                                                 |--> filtered file (a line with a filter)
//                                                 `--> LineTail (stderr: for the exit summary)
//
// Console prefix: "[rank<global rank>]: ", the form torch 2.x uses with
// --local-ranks-filter; a piece of an over-long line ends with kSplitMarker.
// A partial line (no newline yet) is shown once the stream has been idle for
// `idle_flush`.  A partial line rewritten with '\r' is a progress bar: on a
// terminal console each state is drawn live (OutputWriter::WriteProgress);
// on a pipe or file, ProgressThrottle shows a state at most once per
// `progress_interval`, and the final state when the line ends.
//
// Filtered file (--duplicate-*-filters): the attempt's filtered_stdout.log or
// filtered_stderr.log, shared by every rank that feeds it.  A line goes there, with its
// console prefix, when its visible text (as above; a progress bar's final state) contains
// one of the filters.  Each write is whole lines (the OutputWriter writes a chunk at once),
// so lines of different ranks never mix.
//
// Back-pressure: when the OutputWriter is congested the stream stops reading
// and parks itself in the OutputFlow; OutputFlow::ResumeAll() (posted by the
// writer thread when there is room again) restarts every parked stream.
//
// Lifetime: shared_ptr kept alive by its pending operations; the owner keeps
// one too and calls Close() to stop early (a process that escaped its group
// may hold the pipe open forever).  `on_closed` runs once, at EOF or Close().
// Thread safety: io_context thread only.
#pragma once

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/lifetime.h"
#include "launcher/run/line_splitter.h"
#include "launcher/run/output_writer.h"
#include "launcher/sys/unique_fd.h"

namespace gculaunch {

/// Parks paused streams until the writer has room.  io_context thread only,
/// except SpaceCallback()'s result, which any thread may call.
class OutputFlow {
 public:
  explicit OutputFlow(boost::asio::io_context& io) : io_(io) {}
  OutputFlow(const OutputFlow&) = delete;
  OutputFlow& operator=(const OutputFlow&) = delete;
  /// For OutputWriter's on_space: posts ResumeAll() to the io_context.
  std::function<void()> SpaceCallback();
  void Park(std::function<void()> resume) { parked_.push_back(std::move(resume)); }
  void ResumeAll();
  size_t parked() const { return parked_.size(); }

 private:
  boost::asio::io_context& io_;
  std::vector<std::function<void()>> parked_;
  LifetimeGuard lifetime_;  ///< last member: expires first
};

struct StreamRoute {
  TargetPtr console;         ///< null: this stream is not shown on the console
  std::string prefix;        ///< e.g. "[rank3]: "
  TargetPtr log_file;        ///< null: no log file
  LineTail* tail = nullptr;  ///< null: no tail kept
  std::chrono::milliseconds idle_flush{250};
  size_t max_line = LineSplitter::kDefaultMaxLine;
  std::chrono::milliseconds progress_interval{30000};  ///< console not a terminal
  /// When output last arrived (--hang-timeout's progress): set on every read that brought
  /// bytes; null: not tracked.
  std::shared_ptr<std::chrono::steady_clock::time_point> activity;
  /// --duplicate-*-filters: where lines containing one of `filters` are copied; null: none.
  TargetPtr filtered;
  std::vector<std::string> filters;
};

class RankStream : public std::enable_shared_from_this<RankStream> {
 public:
  static std::shared_ptr<RankStream> Start(boost::asio::io_context& io, sys::UniqueFd read_end,
                                           StreamRoute route, OutputWriter& writer,
                                           OutputFlow& flow, std::function<void()> on_closed);
  /// Stops reading now; a carried partial line is flushed.  Idempotent.
  void Close();
  bool closed() const { return closed_; }

  RankStream(boost::asio::io_context& io, int fd, StreamRoute route, OutputWriter& writer,
             OutputFlow& flow, std::function<void()> on_closed);

 private:
  void Read();
  void OnRead(const boost::system::error_code& ec, size_t n);
  void Consume(const char* data, size_t n);
  void EmitLine(std::string_view text, LineEnd end);
  void ShowProgress();
  void ArmTimers();
  void ArmProgressTimer();
  void FlushPartial();
  void WriteBatches();
  void Resume();
  bool live_progress() const { return route_.console && route_.console->terminal(); }

  boost::asio::posix::stream_descriptor pipe_;
  boost::asio::steady_timer idle_timer_;
  boost::asio::steady_timer progress_timer_;
  ProgressThrottle throttle_;
  bool progress_open_ = false;  ///< the partial line is a progress bar
  StreamRoute route_;
  OutputWriter& writer_;
  OutputFlow& flow_;
  std::function<void()> on_closed_;
  LineSplitter splitter_;
  std::array<char, 16 * 1024> buffer_{};
  std::string console_batch_;
  std::string filtered_batch_;  ///< lines for route_.filtered, written with the console's
  bool paused_ = false;
  bool reading_ = false;
  bool closed_ = false;
};

}  // namespace gculaunch
