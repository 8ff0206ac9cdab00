// RestartBackoff: how long a crash loop waits before its next restart, as a pure function.
//
//   NextBackoff(state, config, ran_s) -> {new state, delay_s}
//
// Called once per restart with how long the attempt that just ended ran (from its start to
// its stop).  An attempt that ran less than `quick_s` (10 s) is quick and grows the streak of
// consecutive quick attempts; one that ran `reset_s` (60 s) or more resets it; one in between
// leaves it as it is.  The delay then depends on the streak alone:
//
//   streak   0, 1   2         3             4               ...  n
//   delay    0      initial   2 x initial   4 x initial     ...  initial x 2^(n-2), <= max_s
//
// So with attempts that all fail at once and the default 1:60: the first restart is
// immediate, then 1, 2, 4, 8, 16, 32, 60, 60, ... s; a job that ran for an hour and then
// fails restarts at once again.  `initial_s` 0 (--restart-backoff off) never waits.
//
// Used by RestartPolicy (one node: restart_policy.h) and by node 0's coordinator (several
// nodes, where it decides for the whole job: coordinator_policy.h).  No clock: the caller
// measures.
// Thread safety: pure functions over values.
#pragma once

#include <string>

namespace gculaunch {

/// --restart-backoff INITIAL:MAX (seconds); initial_s 0 is "off".  The thresholds are fixed.
struct BackoffConfig {
  double initial_s = 0;  ///< the first wait (0: no back-off; the default of a value-built config)
  double max_s = 0;      ///< the longest wait
  double quick_s = 10;   ///< an attempt shorter than this is quick: the streak grows
  double reset_s = 60;   ///< an attempt at least this long resets the streak
  bool enabled() const { return initial_s > 0; }
  bool operator==(const BackoffConfig&) const = default;
};

/// The defaults of --restart-backoff: 1:60.
BackoffConfig DefaultBackoffForTest();
/// --restart-backoff INITIAL:MAX as a config (initial_s 0: off), the thresholds fixed.
BackoffConfig MakeBackoff(double initial_s, double max_s);

struct BackoffState {
  int streak = 0;  ///< consecutive quick attempts (see the file comment)
  bool operator==(const BackoffState&) const = default;
};

struct BackoffStep {
  BackoffState state;
  double delay_s = 0;  ///< wait this long before the restart; 0: at once
};

/// The wait before the restart that follows an attempt that ran `ran_s` seconds.
BackoffStep NextBackoff(const BackoffState& state, const BackoffConfig& config, double ran_s);

/// "1:60", or "off": the setting as --restart-backoff takes it (logs, notes).
std::string DescribeBackoffForTest(const BackoffConfig& config);

}  // namespace gculaunch
