// RestartPolicy: what gculaunch does next, as a pure function of its state
// and one event.
//
//   Step(state, config, event) -> {new state, actions}
//
// No Asio, no clock, no I/O: the Supervisor turns real happenings (a rank
// was reaped, a signal arrived, a timer fired, the last process group of an
// attempt emptied) into events and carries out the actions it gets back.
// The table of transitions is in docs/runtime.md and in
// tests/launcher/restart_policy_test.cc.
//
// Phases of one attempt:
//   kRunning   ranks run; a failure or a stop signal starts a teardown
//   kStopping  the stop signal (SIGTERM, or the signal gculaunch received)
//              went to every group; the grace timer runs
//   kKilling   SIGKILL went to every group; the kill-wait timer runs
//   kFinished  Exit was issued; nothing happens any more
// An attempt ends with kAttemptDrained (every rank reaped, every group
// empty): then either the next attempt starts or gculaunch exits.
//
// Thread safety: pure functions over values.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/worker_exit.h"

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
/// USR1, USR2 -> forward; anything else -> ignore.
SignalClass ClassifySignal(int sig, HupMode hup);

enum class StopCause {
  kNone,
  kSuccess,      ///< every rank of the attempt exited 0
  kRankFailed,   ///< a rank exited non-zero or was killed by a signal
  kSignal,       ///< gculaunch received a teardown signal
  kSpawnFailed,  ///< a rank's program could not be started
};

struct PolicyConfig {
  int nranks = 1;        ///< ranks per attempt on this node
  int max_restarts = 0;  ///< --max-restarts
};

struct PolicyState {
  enum class Phase { kRunning, kStopping, kKilling, kFinished };
  Phase phase = Phase::kRunning;
  int restart_count = 0;  ///< TORCHELASTIC_RESTART_COUNT of the current attempt
  int exited = 0;         ///< ranks of the current attempt that exited
  StopCause cause = StopCause::kNone;
  int stop_signal = 0;    ///< the signal, when cause == kSignal
  /// The first rank of the current attempt that failed while it ran.
  std::optional<int> failed_local_rank;
  std::optional<WorkerExit> failed_exit;
  bool operator==(const PolicyState&) const = default;
};

struct PolicyEvent {
  enum class Kind {
    kRankExited,      ///< local_rank, exit
    kAttemptDrained,  ///< every rank reaped and every group empty
    kSignal,          ///< signal, already classified as teardown or forward
    kGraceExpired,
    kKillWaitExpired,
    kSpawnFailed,     ///< local_rank could not be started
  };
  Kind kind;
  int local_rank = -1;
  WorkerExit exit;
  int signal = 0;
  SignalClass signal_class = SignalClass::kIgnore;

  static PolicyEvent RankExited(int local_rank, WorkerExit exit) {
    return {Kind::kRankExited, local_rank, exit};
  }
  static PolicyEvent AttemptDrained() { return {Kind::kAttemptDrained}; }
  static PolicyEvent Signal(int sig, SignalClass cls) {
    return {Kind::kSignal, -1, {}, sig, cls};
  }
  static PolicyEvent GraceExpired() { return {Kind::kGraceExpired}; }
  static PolicyEvent KillWaitExpired() { return {Kind::kKillWaitExpired}; }
  static PolicyEvent SpawnFailed(int local_rank) { return {Kind::kSpawnFailed, local_rank}; }
};

struct PolicyAction {
  enum class Kind {
    kSignalGroups,    ///< send `signal` to every group that still has members
    kStartGraceTimer, ///< arm the grace timer (SIGTERM -> SIGKILL)
    kKillGroups,      ///< SIGKILL every group that still has members
    kStartKillTimer,  ///< arm the bounded wait after SIGKILL
    kStartAttempt,    ///< spawn attempt `restart_count` (old one fully reaped)
    kReportStuck,     ///< name every process that survived SIGKILL
    kExit,            ///< gculaunch exits with `exit_code`
  };
  Kind kind;
  int signal = 0;
  int restart_count = 0;
  int exit_code = 0;

  static PolicyAction SignalGroups(int sig) { return {Kind::kSignalGroups, sig}; }
  static PolicyAction StartGraceTimer() { return {Kind::kStartGraceTimer}; }
  static PolicyAction KillGroups() { return {Kind::kKillGroups}; }
  static PolicyAction StartKillTimer() { return {Kind::kStartKillTimer}; }
  static PolicyAction StartAttempt(int restart_count) {
    return {Kind::kStartAttempt, 0, restart_count};
  }
  static PolicyAction ReportStuck() { return {Kind::kReportStuck}; }
  static PolicyAction Exit(int code) { return {Kind::kExit, 0, 0, code}; }
  bool operator==(const PolicyAction&) const = default;
};

struct PolicyStep {
  PolicyState state;
  std::vector<PolicyAction> actions;
};

/// The transition function.
PolicyStep Step(const PolicyState& state, const PolicyConfig& config, const PolicyEvent& event);

/// gculaunch's exit code for a finished state (exit_codes.h).
int ExitCodeFor(const PolicyState& state);

/// "running", "stopping", ... for logs and tests.
std::string PhaseName(PolicyState::Phase phase);
std::string ActionName(const PolicyAction& action);

}  // namespace gculaunch
