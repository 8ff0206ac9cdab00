#include "launcher/run/restart_policy.h"

#include <algorithm>
#include <csignal>
#include <cstdio>

#include "base/exit_codes.h"

namespace gculaunch {

using Phase = PolicyState::Phase;
using Kind = PolicyEvent::Kind;

SignalClass ClassifySignal(int sig, HupMode hup, const std::vector<int>& extra_stop) {
  if (std::find(extra_stop.begin(), extra_stop.end(), sig) != extra_stop.end()) {
    return SignalClass::kTeardown;
  }
  switch (sig) {
    case SIGINT:
    case SIGTERM:
    case SIGQUIT:
      return SignalClass::kTeardown;
    case SIGHUP:
      return hup == HupMode::kTeardown ? SignalClass::kTeardown : SignalClass::kIgnore;
    case SIGUSR1:
    case SIGUSR2:
      return SignalClass::kForward;
    default:
      return SignalClass::kIgnore;
  }
}

int ExitCodeFor(const PolicyState& state) {
  switch (state.cause) {
    case StopCause::kSuccess:
      return exit_code::kSuccess;
    case StopCause::kRankFailed:
      return state.failed_exit ? state.failed_exit->ShellCode() : exit_code::kInternal;
    case StopCause::kSignal:
      return exit_code::kSignalBase + state.stop_signal;
    case StopCause::kSpawnFailed:
      return exit_code::kSpawnFailed;
    case StopCause::kHang:
      return exit_code::kHang;
    case StopCause::kUnhealthy:
      return exit_code::kStuckProcesses;  // 5: node unhealthy
    case StopCause::kJob:
    case StopCause::kNone:
      break;
  }
  return exit_code::kInternal;
}

namespace {

// Begins a teardown of the current attempt with `sig`.  In job mode a local
// reason (not success, not the job's own stop) is reported to the job.
void BeginStop(PolicyStep& step, const PolicyConfig& config, StopCause cause, int sig) {
  step.state.phase = Phase::kStopping;
  step.state.cause = cause;
  step.actions.push_back(PolicyAction::SignalGroups(sig));
  step.actions.push_back(PolicyAction::StartGraceTimer());
  if (config.agent_decides && cause != StopCause::kSuccess && cause != StopCause::kJob) {
    step.actions.push_back(PolicyAction::NotifyStop());
  }
}

void Escalate(PolicyStep& step) {
  step.state.phase = Phase::kKilling;
  step.actions.push_back(PolicyAction::KillGroups());
  step.actions.push_back(PolicyAction::StartKillTimer());
}

// The attempt, which ran `ran_s`, is fully reaped: restart (at once or after a back-off) or
// exit (job mode: ask the job).  `report`: how its failure looked (the failure streak).
void Drained(PolicyStep& step, const PolicyConfig& config, double ran_s,
             const AttemptReport& report) {
  PolicyState& s = step.state;
  if (config.agent_decides) {
    if (s.cause == StopCause::kSignal) {  // a signalled node leaves the job
      s.phase = Phase::kFinished;
      step.actions.push_back(PolicyAction::Exit(ExitCodeFor(s)));
      return;
    }
    s.phase = Phase::kWaitingForJob;
    step.actions.push_back(PolicyAction::NotifyDrained());
    return;
  }
  const bool restartable =
      s.cause == StopCause::kRankFailed || (s.cause == StopCause::kHang && s.hang_restart);
  if (restartable && s.restart_count < config.max_restarts) {
    const StreakStep streak = NextStreak(
        s.streak, config.streak, AttemptEnd{s.cause == StopCause::kRankFailed, ran_s, report});
    s.streak = streak.state;
    if (streak.stop) {  // pointless to go on: exit as the rank did, saying why
      s.loop_stop = streak.stop->Line();
      s.phase = Phase::kFinished;
      step.actions.push_back(PolicyAction::Exit(ExitCodeFor(s)));
      return;
    }
    const BackoffStep wait = NextBackoff(s.backoff, config.backoff, ran_s);
    PolicyState next;
    next.restart_count = s.restart_count + 1;
    next.backoff = wait.state;
    next.backoff_s = wait.delay_s;
    next.streak = streak.state;
    s = next;
    if (wait.delay_s > 0) {
      s.phase = Phase::kBackingOff;
      step.actions.push_back(PolicyAction::StartBackoff(s.restart_count, wait.delay_s));
      return;
    }
    step.actions.push_back(PolicyAction::StartAttempt(s.restart_count));
    return;
  }
  s.phase = Phase::kFinished;
  step.actions.push_back(PolicyAction::Exit(ExitCodeFor(s)));
}

// A signal gculaunch received, already classified (signal table: ClassifySignal).
void OnSignal(PolicyStep& step, const PolicyConfig& config, const PolicyEvent& event) {
  PolicyState& s = step.state;
  if (s.phase == Phase::kBackingOff && event.signal_class == SignalClass::kForward) return;
  if (event.signal_class == SignalClass::kForward) {
    step.actions.push_back(PolicyAction::SignalGroups(event.signal));
    return;
  }
  if (event.signal_class != SignalClass::kTeardown) return;
  if (s.phase == Phase::kRunning) {
    s.stop_signal = event.signal;
    BeginStop(step, config, StopCause::kSignal, event.signal);
    return;
  }
  if (s.phase == Phase::kWaitingForJob || s.phase == Phase::kBackingOff) {
    // No ranks: leave at once (a back-off is not waited out).
    s.cause = StopCause::kSignal;
    s.stop_signal = event.signal;
    s.phase = Phase::kFinished;
    step.actions.push_back(PolicyAction::Exit(ExitCodeFor(s)));
    return;
  }
  // A teardown signal during a teardown: no restart any more, and it
  // escalates to SIGKILL at once.  A job that already succeeded keeps 0.
  if (s.cause != StopCause::kSignal && s.cause != StopCause::kSuccess) {
    s.cause = StopCause::kSignal;
    s.stop_signal = event.signal;
  }
  if (s.phase == Phase::kStopping) {
    Escalate(step);
  } else {
    step.actions.push_back(PolicyAction::KillGroups());
  }
}

}  // namespace

PolicyState InitialState(const PolicyConfig& config) {
  PolicyState state;
  if (config.agent_decides) state.phase = Phase::kWaitingForJob;
  return state;
}

PolicyStep Step(const PolicyState& state, const PolicyConfig& config, const PolicyEvent& event) {
  PolicyStep step{state, {}};
  PolicyState& s = step.state;
  if (s.phase == Phase::kFinished) return step;

  switch (event.kind) {
    case Kind::kRankExited:
      ++s.exited;
      if (s.phase != Phase::kRunning) break;  // a consequence of the teardown
      if (!event.exit.success()) {
        s.failed_local_rank = event.local_rank;
        s.failed_exit = event.exit;
        BeginStop(step, config, StopCause::kRankFailed, SIGTERM);
      } else if (s.exited >= config.nranks) {
        // Everyone finished: SIGTERM reaches only processes the ranks left
        // behind in their groups (usually none, and the drain is immediate).
        BeginStop(step, config, StopCause::kSuccess, SIGTERM);
      }
      break;

    case Kind::kSpawnFailed:
      if (s.phase != Phase::kRunning) break;
      s.failed_local_rank = event.local_rank;
      BeginStop(step, config, StopCause::kSpawnFailed, SIGTERM);
      break;

    case Kind::kSignal:
      OnSignal(step, config, event);
      break;

    case Kind::kGraceExpired:
      if (s.phase == Phase::kStopping) Escalate(step);
      break;

    case Kind::kKillWaitExpired:
      if (s.phase == Phase::kKilling) {
        s.phase = Phase::kFinished;
        step.actions.push_back(PolicyAction::ReportStuck());
        step.actions.push_back(PolicyAction::Exit(exit_code::kStuckProcesses));
      }
      break;

    case Kind::kAttemptDrained:
      if (s.phase == Phase::kStopping || s.phase == Phase::kKilling) {
        Drained(step, config, event.ran_s, event.report);
      }
      break;

    case Kind::kBackoffExpired:
      if (s.phase != Phase::kBackingOff) break;
      s.phase = Phase::kRunning;
      step.actions.push_back(PolicyAction::StartAttempt(s.restart_count));
      break;

    case Kind::kJobStart:
      if (s.phase != Phase::kWaitingForJob) break;
      s = PolicyState{};
      s.restart_count = event.restart_count;
      step.actions.push_back(PolicyAction::StartAttempt(s.restart_count));
      break;

    case Kind::kJobStop:
      if (s.phase == Phase::kRunning) BeginStop(step, config, StopCause::kJob, SIGTERM);
      break;

    case Kind::kHang:
      if (s.phase != Phase::kRunning || config.agent_decides)
        break;  // several nodes: not yet (spec)
      s.hang_restart = event.restart;
      BeginStop(step, config, StopCause::kHang, SIGTERM);
      break;

    case Kind::kJobExit:
      if (s.phase != Phase::kWaitingForJob) break;
      s.phase = Phase::kFinished;
      step.actions.push_back(PolicyAction::Exit(event.exit_code));
      break;
  }
  return step;
}

std::string PhaseNameForTest(Phase phase) {
  switch (phase) {
    case Phase::kRunning:
      return "running";
    case Phase::kStopping:
      return "stopping";
    case Phase::kKilling:
      return "killing";
    case Phase::kFinished:
      return "finished";
    case Phase::kWaitingForJob:
      return "waiting for the job";
    case Phase::kBackingOff:
      return "backing off";
  }
  return "?";
}

std::string ActionName(const PolicyAction& action) {
  using A = PolicyAction::Kind;
  switch (action.kind) {
    case A::kSignalGroups:
      return "SignalGroups(" + SignalName(action.signal) + ")";
    case A::kStartGraceTimer:
      return "StartGraceTimer";
    case A::kKillGroups:
      return "KillGroups";
    case A::kStartKillTimer:
      return "StartKillTimer";
    case A::kStartAttempt:
      return "StartAttempt(" + std::to_string(action.restart_count) + ")";
    case A::kReportStuck:
      return "ReportStuck";
    case A::kExit:
      return "Exit(" + std::to_string(action.exit_code) + ")";
    case A::kNotifyStop:
      return "NotifyStop";
    case A::kNotifyDrained:
      return "NotifyDrained";
    case A::kStartBackoff: {
      char delay[32];
      std::snprintf(delay, sizeof delay, "%g", action.delay_s);
      return "StartBackoff(" + std::to_string(action.restart_count) + ", " + delay + " s)";
    }
  }
  return "?";
}

}  // namespace gculaunch
