// RestartPolicy: what gculaunch does next, as a pure function of its state
// and one event.
//
//   Step(state, config, event) -> {new state, actions}
//
// No Asio, no clock, no I/O: the Supervisor turns real happenings (a rank
// was reaped, a signal arrived, a timer fired, the last process group of an
// attempt emptied) into events and carries out the actions it gets back.
// The table of transitions is in docs/runtime.md and in
// tests/launcher/run/restart_policy_test.cc.
//
// Phases of one attempt:
//   kRunning   ranks run; a failure or a stop signal starts a teardown
//   kStopping  the stop signal (SIGTERM, or the signal gculaunch received)
//              went to every group; the grace timer runs
//   kKilling   SIGKILL went to every group; the kill-wait timer runs
//   kFinished  Exit was issued; nothing happens any more
//   kBackingOff  the attempt failed quickly again: the next one starts when
//              the back-off timer fires (restart_backoff.h); no rank runs
// An attempt ends with kAttemptDrained (every rank reaped, every group
// empty, and how long it ran): then the next attempt starts, at once or
// after a back-off (StartBackoffTimer, then kBackoffExpired), or gculaunch
// exits.  A teardown signal during the back-off exits at once (128+S).
// Before a restart after a rank's failure, the failure streak (failure_streak.h)
// may end the loop: the same failure N times in a row, or a progress file that
// stopped advancing (--max-same-failures); gculaunch then exits with the rank's
// code and PolicyState::loop_stop says why.
//
// Job mode (PolicyConfig::job, a multi-node job): the node does not decide
// restarts alone.  The state starts in kWaitingForJob (InitialState) and the
// job (launcher/cluster/node_agent.h) drives it with three events:
//   kJobStart(n)   start attempt n (the job's epoch n)
//   kJobStop       another node failed or was lost: stop the ranks (cause kJob)
//   kJobExit(code) the job is over for this node: exit with `code`
// A local failure, spawn failure or teardown signal still starts the
// teardown at once and is reported to the job (NotifyStop); a drained attempt
// is reported (NotifyDrained) and waits in kWaitingForJob for kJobStart or
// kJobExit, except after a teardown signal: a signalled node exits without
// waiting (128+S), it never restarts.
//
// Thread safety: pure functions over values.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launcher/run/failure_streak.h"
#include "launcher/run/restart_backoff.h"
#include "launcher/sys/worker_exit.h"

namespace gculaunch {

/// What a signal received by gculaunch means.
enum class SignalClass {
  kTeardown,  ///< forward the same signal to every group, grace period, SIGKILL
  kForward,   ///< forward to every group; nothing stops
  kIgnore,    ///< logged and otherwise ignored
};

/// How SIGHUP is treated: torn down like SIGTERM when gculaunch's stdin is a
/// terminal (the session really ended), ignored otherwise (nohup, batch jobs).
enum class HupMode { kTeardown, kIgnore };

/// The signal table: INT, TERM, QUIT -> teardown; HUP -> per `hup`;
/// USR1, USR2 -> forward; anything else -> ignore.  A signal in `extra_stop`
/// (--signals-to-handle) is a teardown signal.
SignalClass ClassifySignal(int sig, HupMode hup, const std::vector<int>& extra_stop = {});

enum class StopCause {
  kNone,
  kSuccess,      ///< every rank of the attempt exited 0
  kRankFailed,   ///< a rank exited non-zero or was killed by a signal
  kSignal,       ///< gculaunch received a teardown signal
  kSpawnFailed,  ///< a rank's program could not be started
  kJob,          ///< job mode: the job stopped the ranks (another node failed or was lost)
  kHang,         ///< --hang-timeout: no progress (stop, or restart while restarts are left)
  kUnhealthy,    ///< the health gate found this node's cards unhealthy (health_runner.h): exit 5
};

struct PolicyConfig {
  int nranks = 1;        ///< ranks per attempt on this node
  int max_restarts = 0;  ///< --max-restarts (job mode: enforced job-wide, not here)
  /// Job mode (see the file comment): a node agent decides restarts with the other nodes.
  bool agent_decides = false;
  /// --restart-backoff (job mode: the coordinator's, not this); default off here, 1:60 from
  /// the launch spec.
  BackoffConfig backoff;
  /// --max-same-failures and --progress-file (job mode: the coordinator's, not this); default
  /// off here, 3 from the launch spec.
  StreakConfig streak;
};

struct PolicyState {
  enum class Phase { kRunning, kStopping, kKilling, kFinished, kWaitingForJob, kBackingOff };
  Phase phase = Phase::kRunning;
  int restart_count = 0;  ///< TORCHELASTIC_RESTART_COUNT of the current attempt
  int exited = 0;         ///< ranks of the current attempt that exited
  StopCause cause = StopCause::kNone;
  int stop_signal = 0;        ///< the signal, when cause == kSignal
  bool hang_restart = false;  ///< cause == kHang: restart (--on-hang restart) if restarts remain
  /// The first rank of the current attempt that failed while it ran.
  std::optional<int> failed_local_rank;
  std::optional<WorkerExit> failed_exit;
  BackoffState backoff;  ///< the crash loop's streak, carried from attempt to attempt
  double backoff_s = 0;  ///< the wait before this attempt (kBackingOff: the wait under way)
  StreakState streak;    ///< the failure streak, carried from attempt to attempt
  /// Set when the failure streak ended the loop: the summary's line ("the same failure 4
  /// times in a row: ...; not restarting (--max-same-failures)"); empty otherwise.
  std::string loop_stop;
  /// cause == kUnhealthy: the unhealthy checks in one line (HealthReport::Describe).
  std::string unhealthy;
  bool operator==(const PolicyState&) const = default;
};

struct PolicyEvent {
  enum class Kind {
    kRankExited,      ///< local_rank, exit
    kAttemptDrained,  ///< every rank reaped and every group empty; the attempt ran `ran_s`;
                      ///< `report`: its failure as this node saw it (the failure streak)
    kSignal,          ///< signal, already classified as teardown or forward
    kGraceExpired,
    kKillWaitExpired,
    kSpawnFailed,     ///< local_rank could not be started
    kJobStart,        ///< job mode: start attempt `restart_count`
    kJobStop,         ///< job mode: stop the ranks
    kJobExit,         ///< job mode: exit with `exit_code`
    kHang,            ///< --hang-timeout fired; `restart`: --on-hang restart
    kBackoffExpired,  ///< the back-off before the next attempt is over
  };
  Kind kind;
  int local_rank = -1;
  WorkerExit exit;
  int signal = 0;
  SignalClass signal_class = SignalClass::kIgnore;
  int restart_count = 0;  ///< kJobStart
  int exit_code = 0;      ///< kJobExit
  bool restart = false;   ///< kHang
  double ran_s = 0;       ///< kAttemptDrained: from the attempt's start to its stop
  AttemptReport report;   ///< kAttemptDrained

  static PolicyEvent RankExited(int local_rank, WorkerExit exit) {
    return {Kind::kRankExited, local_rank, exit};
  }
  static PolicyEvent AttemptDrained(double ran_s = 0, AttemptReport report = {}) {
    PolicyEvent e{Kind::kAttemptDrained};
    e.ran_s = ran_s;
    e.report = std::move(report);
    return e;
  }
  static PolicyEvent BackoffExpired() { return {Kind::kBackoffExpired}; }
  static PolicyEvent Signal(int sig, SignalClass cls) { return {Kind::kSignal, -1, {}, sig, cls}; }
  static PolicyEvent GraceExpired() { return {Kind::kGraceExpired}; }
  static PolicyEvent KillWaitExpired() { return {Kind::kKillWaitExpired}; }
  static PolicyEvent SpawnFailed(int local_rank) { return {Kind::kSpawnFailed, local_rank}; }
  static PolicyEvent JobStart(int restart_count) {
    return {Kind::kJobStart, -1, {}, 0, SignalClass::kIgnore, restart_count};
  }
  static PolicyEvent JobStop() { return {Kind::kJobStop}; }
  static PolicyEvent Hang(bool restart) {
    return {Kind::kHang, -1, {}, 0, SignalClass::kIgnore, 0, 0, restart};
  }
  static PolicyEvent JobExit(int code) {
    return {Kind::kJobExit, -1, {}, 0, SignalClass::kIgnore, 0, code};
  }
};

struct PolicyAction {
  enum class Kind {
    kSignalGroups,     ///< send `signal` to every group that still has members
    kStartGraceTimer,  ///< arm the grace timer (SIGTERM -> SIGKILL)
    kKillGroups,       ///< SIGKILL every group that still has members
    kStartKillTimer,   ///< arm the bounded wait after SIGKILL
    kStartAttempt,     ///< spawn attempt `restart_count` (old one fully reaped)
    kReportStuck,      ///< name every process that survived SIGKILL
    kExit,             ///< gculaunch exits with `exit_code`
    kNotifyStop,       ///< job mode: tell the job a local teardown began (state says why)
    kNotifyDrained,    ///< job mode: tell the job the attempt drained; wait for it
    kStartBackoff,     ///< wait `delay_s`, then deliver kBackoffExpired (attempt `restart_count`)
  };
  Kind kind;
  int signal = 0;
  int restart_count = 0;
  int exit_code = 0;
  double delay_s = 0;  ///< kStartBackoff

  static PolicyAction SignalGroups(int sig) { return {Kind::kSignalGroups, sig}; }
  static PolicyAction StartGraceTimer() { return {Kind::kStartGraceTimer}; }
  static PolicyAction KillGroups() { return {Kind::kKillGroups}; }
  static PolicyAction StartKillTimer() { return {Kind::kStartKillTimer}; }
  static PolicyAction StartAttempt(int restart_count) {
    return {Kind::kStartAttempt, 0, restart_count};
  }
  static PolicyAction ReportStuck() { return {Kind::kReportStuck}; }
  static PolicyAction Exit(int code) { return {Kind::kExit, 0, 0, code}; }
  static PolicyAction NotifyStop() { return {Kind::kNotifyStop}; }
  static PolicyAction NotifyDrained() { return {Kind::kNotifyDrained}; }
  static PolicyAction StartBackoff(int restart_count, double delay_s) {
    return {Kind::kStartBackoff, 0, restart_count, 0, delay_s};
  }
  bool operator==(const PolicyAction&) const = default;
};

struct PolicyStep {
  PolicyState state;
  std::vector<PolicyAction> actions;
};

/// What a job-mode node tells the job when a local teardown begins (NotifyStop).
struct LocalStopReport {
  StopCause cause = StopCause::kRankFailed;  ///< kRankFailed, kSpawnFailed or kSignal
  int rank = -1;                             ///< the failed rank (global); -1: none or unknown
  int local_rank = -1;
  int exit_code = 0;  ///< the rank's shell code; 127 for kSpawnFailed; 128+S for kSignal
  std::string what;   ///< "exit code 7", "signal 11 (SIGSEGV)", "SIGTERM", the spawn error
};

/// The state a Supervisor starts in: kRunning, or kWaitingForJob in job mode.
PolicyState InitialState(const PolicyConfig& config);

/// The transition function.
PolicyStep Step(const PolicyState& state, const PolicyConfig& config, const PolicyEvent& event);

/// gculaunch's exit code for a finished state (exit_codes.h).
int ExitCodeFor(const PolicyState& state);

/// "running", "stopping", ... for logs and tests.
std::string PhaseNameForTest(PolicyState::Phase phase);
std::string ActionName(const PolicyAction& action);

}  // namespace gculaunch
