// StackDumper: asks running ranks for their Python stacks and collects what they wrote.
//
// A rank started with --stack-dumps loads gculaunch's hook (launcher/frontend/stack_hook.h),
// which makes faulthandler append every thread's stack to the rank's own file when the rank
// receives the stack-dump signal.  For each target the dumper:
//   1. refuses a rank that is not running, that has no hook file, or whose /proc status
//      says it does not catch the signal (its default action would kill it): such a rank is
//      reported with the reason and never signalled;
//   2. notes the file's size and sends the signal to the rank's pid only, never to its
//      process group (a forked DataLoader worker inherits the handler and the file, and
//      would write into the same file);
//   3. polls the file's size every `poll` until it grew and then stayed the same for
//      `quiet` (faulthandler writes no end marker), at most `bound` in all; what was
//      appended is the dump, at most kMaxDumpBytes of it.  A rank that wrote nothing by then
//      is reported ("no dump").  The file is looked at and read by the rules for files a
//      rank can replace (sys::ReadRankFile: never through a link, never a FIFO or another
//      user's file).
// Requests are served one at a time, in order (two dumps at once would interleave in the
// same files).
//
// Ownership: the dumper owns its timer; the callbacks run on the io_context and must not
// destroy the dumper.  Pending requests are dropped, uncalled, when it is destroyed.
// Thread safety: io_context thread only.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "base/lifetime.h"
#include "launcher/run/rank_record.h"

namespace gculaunch {

/// What came back for one rank.
struct StackDump {
  int local_rank = 0;
  int rank = 0;
  pid_t pid = -1;
  bool ok = false;
  std::string text;  ///< the dump (ok), faulthandler's format
  std::string why;   ///< why there is no dump (not ok), one line
};

class StackDumper {
 public:
  struct Options {
    std::chrono::milliseconds poll{20};
    std::chrono::milliseconds quiet{150};
    std::chrono::milliseconds bound{3000};
  };
  using Done = std::function<void(std::vector<StackDump>)>;

  StackDumper(boost::asio::io_context& io, Options options);
  StackDumper(const StackDumper&) = delete;
  StackDumper& operator=(const StackDumper&) = delete;

  /// Dumps `targets` (after any request already running) and calls `done` with one
  /// StackDump per target, in the same order.
  void Dump(std::vector<StackTarget> targets, Done done);

 private:
  struct Pending {
    StackDump dump;
    std::string file;
    long long start_size = 0;
    long long last_size = 0;
    std::chrono::steady_clock::time_point last_change;
    bool waiting = false;
  };
  struct Request {
    std::vector<StackTarget> targets;
    Done done;
  };
  void StartNext();
  void Poll();
  void Finish();

  boost::asio::io_context& io_;
  Options options_;
  boost::asio::steady_timer timer_;
  std::deque<Request> queue_;
  std::vector<Pending> current_;
  Done current_done_;
  bool busy_ = false;
  std::chrono::steady_clock::time_point started_;
  LifetimeGuard lifetime_;  ///< last member
};

/// The most of one rank's dump that is kept: faulthandler writes at most 100 threads of 100
/// frames, far less in practice; a file that grew by more holds something else.
inline constexpr size_t kMaxDumpBytes = size_t{1} << 20;

/// The size in bytes of the hook's file, -1 when it is missing or not a regular file of the
/// job's user (a link, a FIFO: sys::StatRankFile).
long long FileSize(const std::string& path);

}  // namespace gculaunch
