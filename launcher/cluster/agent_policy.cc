#include "launcher/cluster/agent_policy.h"

#include "base/exit_codes.h"

namespace gculaunch::job {

AgentEvent AgentEvent::Plan(JobPlan plan) {
  AgentEvent e{Kind::kPlan};
  e.plan = std::move(plan);
  return e;
}
AgentEvent AgentEvent::Marker(StopMarker marker) {
  AgentEvent e{Kind::kMarker};
  e.marker = std::move(marker);
  return e;
}
AgentEvent AgentEvent::LocalStop(LocalStopReport stop) {
  AgentEvent e{Kind::kLocalStop};
  e.stop = std::move(stop);
  return e;
}
AgentEvent AgentEvent::Drained(bool success) {
  AgentEvent e{Kind::kDrained};
  e.success = success;
  return e;
}
AgentEvent AgentEvent::SupervisorFinished(int exit_code) {
  AgentEvent e{Kind::kSupervisorFinished};
  e.exit_code = exit_code;
  return e;
}
AgentEvent AgentEvent::MasterLost(std::string what) {
  AgentEvent e{Kind::kMasterLost};
  e.what = std::move(what);
  return e;
}

namespace {

using AK = AgentAction::Kind;
using APhase = AgentState::Phase;

AgentAction Act(AK kind, int epoch = 0) {
  AgentAction a{kind};
  a.epoch = epoch;
  return a;
}

// The marker a local teardown publishes.
StopMarker MarkerFor(const LocalStopReport& stop, int epoch, int restarts, int node) {
  StopMarker m;
  m.epoch = epoch;
  m.restarts = restarts;
  m.node = node;
  m.exit_code = stop.exit_code;
  m.what = stop.what;
  if (stop.cause == StopCause::kSignal) {
    m.kind = StopMarker::Kind::kNodeLeft;
    return m;
  }
  m.kind = StopMarker::Kind::kRankFailed;
  m.rank = stop.rank;
  m.local_rank = stop.local_rank;
  m.restartable = stop.cause != StopCause::kSpawnFailed;
  return m;
}

void Leave(AgentStep& step, int code) {
  step.state.phase = APhase::kLeaving;
  step.state.exit_code = code;
  AgentAction a = Act(AK::kExitRanks, step.state.epoch);
  a.exit_code = code;
  step.actions.push_back(a);
}

// Back to kJoining: a new join request, which reports the last epoch this node ran.
void Rejoin(AgentStep& step) {
  AgentState& s = step.state;
  s.phase = APhase::kJoining;
  s.stopping = false;
  s.drained = false;
  s.marker_published = false;
  s.master_lost = false;
  s.marker.reset();
  step.actions.push_back(Act(AK::kJoin, s.last_epoch));
}

// Whether the marker says that the job lost this very node (it was silent, e.g. stopped or
// cut off): node 0 no longer counts it, so it must join again to take part.
bool LostMe(const StopMarker& m, const AgentConfig& config) {
  return m.kind == StopMarker::Kind::kNodeLost && m.node == config.node_rank;
}

// The epoch's marker is known and its ranks are gone: restart, rejoin or leave.
void Verdict(AgentStep& step, const AgentConfig& config) {
  AgentState& s = step.state;
  if (s.signalled_code) {
    Leave(step, *s.signalled_code);
    return;
  }
  if (!Restartable(*s.marker, config.max_restarts)) {
    Leave(step, ExitCodeFor(*s.marker, config.node_rank));
    return;
  }
  if (s.master_lost || LostMe(*s.marker, config)) {
    Rejoin(step);
    return;
  }
  step.actions.push_back(Act(AK::kReportReaped, s.epoch));
  s.epoch += 1;
  s.phase = APhase::kWaitingPlan;
  s.stopping = false;
  s.drained = false;
  s.marker_published = false;
  s.marker.reset();
  step.actions.push_back(Act(AK::kWaitPlan, s.epoch));
}

void OnStart(AgentStep& step) {
  if (step.state.phase != APhase::kJoining) return;
  step.actions.push_back(Act(AK::kJoin, step.state.last_epoch));
}

void OnPlan(AgentStep& step, const AgentConfig& config, const JobPlan& plan) {
  AgentState& s = step.state;
  const bool admitted = s.phase == APhase::kJoining;
  if (!admitted && (s.phase != APhase::kWaitingPlan || plan.epoch != s.epoch)) return;
  if (plan.abort) {
    s.marker = *plan.abort;
    Leave(step, ExitCodeFor(*plan.abort, config.node_rank));
    return;
  }
  s.phase = APhase::kRunning;
  s.epoch = plan.epoch;
  s.restarts = RestartsOf(plan);
  s.last_epoch = plan.epoch;
  s.stopping = false;
  s.drained = false;
  s.marker_published = false;
  s.master_lost = false;
  s.marker.reset();
  AgentAction start = Act(AK::kStartRanks, s.epoch);
  start.plan = plan;
  step.actions.push_back(std::move(start));
  step.actions.push_back(Act(AK::kWatchMarker, s.epoch));
}

void OnLocalStop(AgentStep& step, const AgentConfig& config, const LocalStopReport& stop) {
  AgentState& s = step.state;
  if (s.phase != APhase::kRunning || s.drained) return;
  s.stopping = true;
  if (stop.cause == StopCause::kSignal) s.signalled_code = stop.exit_code;
  if (!s.marker && !s.marker_published && !s.master_lost) {
    AgentAction publish = Act(AK::kPublishMarker, s.epoch);
    publish.marker = MarkerFor(stop, s.epoch, s.restarts, config.node_rank);
    step.actions.push_back(std::move(publish));
    s.marker_published = true;
  }
}

// The epoch's marker `marker` is known: stop the ranks, or decide once they are gone.
void MarkerKnown(AgentStep& step, const AgentConfig& config, const StopMarker& marker) {
  AgentState& s = step.state;
  s.marker = marker;
  if (!s.stopping && !s.drained) {
    s.stopping = true;
    step.actions.push_back(Act(AK::kStopRanks, s.epoch));
  }
  if (s.drained) Verdict(step, config);
}

void OnMarker(AgentStep& step, const AgentConfig& config, const StopMarker& marker) {
  const AgentState& s = step.state;
  if (s.phase != APhase::kRunning || marker.epoch != s.epoch || s.marker) return;
  MarkerKnown(step, config, marker);
}

void OnDrained(AgentStep& step, const AgentConfig& config, bool success) {
  AgentState& s = step.state;
  if (s.phase != APhase::kRunning || s.drained) return;
  s.drained = true;
  if (s.marker) {
    Verdict(step, config);
  } else if (success && !s.stopping) {
    step.actions.push_back(Act(AK::kReportDone, s.epoch));
  }
}

void OnSupervisorFinished(AgentStep& step, const AgentConfig& config, int exit_code) {
  AgentState& s = step.state;
  if (s.phase == APhase::kRunning && !s.marker && !s.marker_published && !s.master_lost) {
    // The node leaves on its own (a signal during the drain, ranks that SIGKILL could
    // not stop): the others must not wait for it.
    AgentAction publish = Act(AK::kPublishMarker, s.epoch);
    publish.marker.kind = StopMarker::Kind::kNodeLeft;
    publish.marker.epoch = s.epoch;
    publish.marker.restarts = s.restarts;
    publish.marker.node = config.node_rank;
    publish.marker.exit_code = exit_code;
    publish.marker.what = "its gculaunch exited with code " + std::to_string(exit_code);
    publish.marker.restartable = s.signalled_code.has_value();  // stuck ranks: no return
    step.actions.push_back(std::move(publish));
    s.marker_published = true;
  }
  // A node that is not admitted (joining) is no member now: nobody to say bye to.
  const bool member = s.phase != APhase::kJoining && !s.master_lost;
  s.phase = APhase::kDone;
  s.exit_code = exit_code;
  if (member) {
    AgentAction bye = Act(AK::kSayBye, s.epoch);
    bye.exit_code = exit_code;
    step.actions.push_back(bye);
  }
  AgentAction finish = Act(AK::kFinish, s.epoch);
  finish.exit_code = exit_code;
  step.actions.push_back(finish);
}

void OnMasterLost(AgentStep& step, const AgentConfig& config, const std::string& what) {
  AgentState& s = step.state;
  switch (s.phase) {
    case APhase::kJoining:
      // The store went away while this node was joining: join again (the executor keeps
      // its deadline).
      step.actions.push_back(Act(AK::kJoin, s.last_epoch));
      return;
    case APhase::kWaitingPlan:
      // The epoch before already re-forms the job; node 0 must come back for it.
      Rejoin(step);
      return;
    case APhase::kRunning:
      break;
    case APhase::kLeaving:
    case APhase::kDone:
      return;
  }
  s.master_lost = true;
  if (s.marker) {
    // A restart was already decided: the next epoch needs node 0 back.  A final verdict
    // needs no master for its teardown.
    if (s.drained && Restartable(*s.marker, config.max_restarts)) Rejoin(step);
    return;
  }
  StopMarker lost;
  lost.kind = StopMarker::Kind::kNodeLost;
  lost.epoch = s.epoch;
  lost.restarts = s.restarts;
  lost.node = 0;
  lost.host = config.master_host;
  lost.addr = config.master_addr;
  lost.what = what;
  MarkerKnown(step, config, lost);
}

}  // namespace

AgentStep Step(const AgentState& state, const AgentConfig& config, const AgentEvent& event) {
  AgentStep step{state, {}};
  if (step.state.phase == APhase::kDone) return step;
  switch (event.kind) {
    case AgentEvent::Kind::kStart:
      OnStart(step);
      break;
    case AgentEvent::Kind::kPlan:
      OnPlan(step, config, event.plan);
      break;
    case AgentEvent::Kind::kLocalStop:
      OnLocalStop(step, config, event.stop);
      break;
    case AgentEvent::Kind::kMarker:
      OnMarker(step, config, event.marker);
      break;
    case AgentEvent::Kind::kDrained:
      OnDrained(step, config, event.success);
      break;
    case AgentEvent::Kind::kSupervisorFinished:
      OnSupervisorFinished(step, config, event.exit_code);
      break;
    case AgentEvent::Kind::kMasterLost:
      OnMasterLost(step, config, event.what);
      break;
  }
  return step;
}

std::string ActionName(const AgentAction& a) {
  const std::string e = "(" + std::to_string(a.epoch) + ")";
  switch (a.kind) {
    case AK::kJoin:
      return "Join" + e;
    case AK::kWaitPlan:
      return "WaitPlan" + e;
    case AK::kStartRanks:
      return "StartRanks" + e;
    case AK::kWatchMarker:
      return "WatchMarker" + e;
    case AK::kPublishMarker:
      return "PublishMarker" + e + "[" + KindName(a.marker.kind) + "]";
    case AK::kStopRanks:
      return "StopRanks" + e;
    case AK::kReportDone:
      return "ReportDone" + e;
    case AK::kReportReaped:
      return "ReportReaped" + e;
    case AK::kExitRanks:
      return "ExitRanks(" + std::to_string(a.exit_code) + ")";
    case AK::kSayBye:
      return "SayBye(" + std::to_string(a.exit_code) + ")";
    case AK::kFinish:
      return "Finish(" + std::to_string(a.exit_code) + ")";
  }
  return "?";
}

}  // namespace gculaunch::job
