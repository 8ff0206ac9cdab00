// FailureStreak: when another restart is pointless, as a pure function.
//
//   NextStreak(state, config, attempt) -> {new state, stop (or none)}
//
// Called once per failed attempt that a restart could follow.  Two rules stop the loop, both
// counted with --max-same-failures N (0: neither rule):
//
//  * the same failure: an attempt's signature is its first failing rank's exit code or signal
//    plus the last line of its error file or stderr (failure_signature.h).  The N-th
//    consecutive quick attempt (shorter than the back-off's 10 s, restart_backoff.h, whether
//    or not --restart-backoff is on) whose signature equals the one before stops the loop:
//
//      attempt     1    2    3    4            (N = 3, every one quick and failing the same)
//      same        0    1    2    3 -> stop    so 4 attempts ran
//
//    A slow attempt, one without a signature, or one that failed differently starts over.
//
//  * no progress (--progress-file): the number the script writes there, read after every
//    failed attempt, did not rise above the highest seen after an earlier failed attempt, N
//    times in a row, whatever the signatures and however long the attempts ran.  The first
//    failed attempt sets the reference, so again N + 1 attempts ran.
//
// Only attempts that ended because a rank failed count (`rank_failed`); a lost node or a hang
// (--on-hang restart) is not the script's failure and starts both rules over.  A single node
// asks this in RestartPolicy (restart_policy.h); several nodes ask it on node 0's coordinator
// (coordinator_policy.h), which decides for the job, with the first failing node's signature
// and the highest progress number any node read.
//
// Thread safety: pure functions over values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gculaunch {

struct StreakConfig {
  /// --max-same-failures N; 0: never stop (a value-built config; the launch spec's default
  /// is 3).
  int max_same = 0;
  std::string progress_file;  ///< --progress-file, for the rule and its message; empty: none
  double quick_s = 10;        ///< an attempt shorter than this is quick (restart_backoff.h)
  bool operator==(const StreakConfig&) const = default;
};

/// What one node saw of an attempt that failed.
struct AttemptReport {
  /// The first failing rank's exit and last line ("exit code 1: KeyError: 'lr'"); empty:
  /// no rank of this node failed, or nothing is known about it.
  std::string signature;
  /// The --progress-file number after the attempt; none: no file, no number in it, or no
  /// answer in time.
  std::optional<std::int64_t> progress;
  bool operator==(const AttemptReport&) const = default;
};

/// One failed attempt, as the streak sees it.
struct AttemptEnd {
  bool rank_failed = false;  ///< a rank failed (not a lost node, not a hang)
  double ran_s = 0;          ///< from its start to its stop
  AttemptReport report;
};

struct StreakState {
  std::string signature;       ///< the last quick attempt's signature; empty: none
  int same = 0;                ///< consecutive quick attempts whose signature equals the one before
  bool progress_seen = false;  ///< a failed attempt set the reference
  std::optional<std::int64_t> highest;  ///< the highest number read so far
  int stalled = 0;                      ///< consecutive failed attempts without a rise
  bool operator==(const StreakState&) const = default;
};

/// Why the loop stops.
struct StreakStop {
  enum class Kind { kSameFailure, kNoProgress };
  Kind kind = Kind::kSameFailure;
  int attempts = 0;                      ///< the attempts the rule looked at (N + 1)
  std::string signature;                 ///< kSameFailure: the repeated signature
  std::optional<std::int64_t> progress;  ///< kNoProgress: the number it stayed at
  std::string progress_file;             ///< kNoProgress: the file
  /// One line for the summary and the logs: "the same failure 4 times in a row: exit code
  /// 1: KeyError: 'lr'; not restarting (--max-same-failures)".
  std::string Line() const;
  bool operator==(const StreakStop&) const = default;
};

struct StreakStep {
  StreakState state;
  std::optional<StreakStop> stop;
};

/// The streaks after `attempt`, and whether the loop stops there.
StreakStep NextStreak(const StreakState& state, const StreakConfig& config,
                      const AttemptEnd& attempt);

}  // namespace gculaunch
