// LineSplitter: turns the byte stream of one rank's stdout or stderr into
// whole lines, carrying an incomplete last line to the next chunk.
//
//   Feed("ab")       -> nothing (carries "ab")
//   Feed("c\nde")    -> "abc" (kNewline), carries "de"
//   FlushPartial()   -> "de" (kFlushed)          idle timer or end of stream
//
// A line longer than `max_line` bytes is emitted in pieces of `max_line`
// bytes, each but the last marked kSplit (the console shows a marker), so
// nothing is ever dropped and memory stays bounded.  Bytes are not
// interpreted except '\n'; VisibleText() applies terminal '\r' semantics for
// the console, and ProgressThrottle decides which progress-bar states ('\r'
// updates of a partial line) a console that is not a terminal gets.
//
// Thread safety: a plain value; one per stream.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace gculaunch {

enum class LineEnd {
  kNewline,  ///< the line ended with '\n' (not included in the text)
  kSplit,    ///< a max_line piece of a longer line; the line continues
  kFlushed,  ///< no newline yet: flushed when the stream went idle or ended
};

/// Appended on the console to a piece of a split line.
inline constexpr std::string_view kSplitMarker = " [gculaunch: line continues]";

class LineSplitter {
 public:
  using Emit = std::function<void(std::string_view text, LineEnd end)>;
  static constexpr size_t kDefaultMaxLine = 64 * 1024;

  explicit LineSplitter(size_t max_line = kDefaultMaxLine) : max_line_(max_line) {}

  /// Emits every line completed by `bytes` (and pieces of over-long lines).
  void Feed(std::string_view bytes, const Emit& emit);
  /// Emits the carried partial line, if any, as kFlushed.
  void FlushPartial(const Emit& emit);
  bool has_partial() const { return !partial_.empty(); }
  size_t partial_size() const { return partial_.size(); }
  std::string_view partial() const { return partial_; }
  /// True when the carried partial line holds a '\r' (a progress bar).
  bool partial_is_progress() const { return partial_.find('\r') != std::string::npos; }
  /// Drops what a terminal would no longer show of a progress partial (all but
  /// its latest state), so that a bar that never ends its line stays small.
  /// VisibleText() of the partial, and of whatever follows, is unchanged.
  void CompactProgress();

 private:
  size_t max_line_;
  std::string partial_;
};

/// What a terminal would show of `text`: a trailing '\r' (CRLF) is dropped,
/// then only what follows the last '\r' remains (a progress bar's latest state).
std::string_view VisibleText(std::string_view text);

/// --duplicate-*-filters: whether `line` contains one of `filters`, each a plain,
/// case-sensitive substring (an empty filter is in every line, as in torchrun).
bool ContainsAnyOf(std::string_view line, const std::vector<std::string>& filters);

/// For a console that is not a terminal: shows a stream's progress states
/// (a partial line rewritten with '\r') at most once per `interval`, a state
/// that had to wait once the interval has passed (due()), and the final state
/// when the line ends, unless it is the state shown last.  Pure: the caller
/// passes the time.  interval 0: every state offered is shown.
class ProgressThrottle {
 public:
  using Clock = std::chrono::steady_clock;
  explicit ProgressThrottle(std::chrono::milliseconds interval) : interval_(interval) {}

  /// A new latest state at `now`; true: show it now.  Otherwise it is pending.
  bool Offer(std::string_view state, Clock::time_point now);
  /// When the pending state may be shown; Clock::time_point::max() if none.
  Clock::time_point due() const { return pending_ ? next_ : Clock::time_point::max(); }
  /// At due(): true (show `state`, the latest) if a state was pending and its time has come.
  bool TakeDue(std::string_view state, Clock::time_point now);
  /// The progress line ended (newline or end of stream) with `state`; true: show it.
  bool Final(std::string_view state);

 private:
  void Shown(std::string_view state, Clock::time_point now);
  std::chrono::milliseconds interval_;
  Clock::time_point next_ = Clock::time_point::min();
  std::string shown_;  ///< the state shown last for the current line
  bool pending_ = false;
};

/// The last `max_lines` lines of a stream (each cut to `max_line_bytes`),
/// kept for the exit summary: a Python traceback shows even without @record.
class LineTail {
 public:
  explicit LineTail(size_t max_lines = 20, size_t max_line_bytes = 2048)
      : max_lines_(max_lines), max_line_bytes_(max_line_bytes) {}
  void Add(std::string_view line);
  /// Oldest first.
  std::vector<std::string> lines() const;

 private:
  size_t max_lines_;
  size_t max_line_bytes_;
  std::vector<std::string> ring_;
  size_t next_ = 0;  ///< where the next line goes once the ring is full
};

/// For tests: all lines of `chunks` fed in order, then flushed.
struct SplitLine {
  std::string text;
  LineEnd end;
  bool operator==(const SplitLine&) const = default;
};
std::vector<SplitLine> SplitAllForTest(const std::vector<std::string>& chunks,
                                       size_t max_line = LineSplitter::kDefaultMaxLine);

}  // namespace gculaunch
