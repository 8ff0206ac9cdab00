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
AgentEvent AgentEvent::SupervisorFinished(int exit_code, std::string unhealthy) {
  AgentEvent e{Kind::kSupervisorFinished};
  e.exit_code = exit_code;
  e.what = std::move(unhealthy);
  return e;
}
AgentEvent AgentEvent::Node0Lost(std::string what) {
  AgentEvent e{Kind::kNode0Lost};
  e.what = std::move(what);
  return e;
}
AgentEvent AgentEvent::RejoinDeadline(std::string what) {
  AgentEvent e{Kind::kRejoinDeadline};
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

AgentAction Say(AgentAction::Level level, std::string text) {
  AgentAction a{AK::kLog};
  a.level = level;
  a.text = std::move(text);
  return a;
}

void Log(AgentStep& step, AgentAction::Level level, std::string text) {
  step.actions.push_back(Say(level, std::move(text)));
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
  s.node0_lost = false;
  s.marker.reset();
  s.returning = true;
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
  if (s.node0_lost || LostMe(*s.marker, config)) {
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
  s.returning = false;
  if (plan.abort) {
    step.actions.push_back(MarkerLog(*plan.abort, config));
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
  s.node0_lost = false;
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
  if (!s.marker && !s.marker_published && !s.node0_lost) {
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

void OnSupervisorFinished(AgentStep& step, const AgentConfig& config, int exit_code,
                          const std::string& unhealthy) {
  AgentState& s = step.state;
  if (s.phase == APhase::kRunning && !s.marker && !s.marker_published && !s.node0_lost) {
    // The node leaves on its own (a signal during the drain, ranks that SIGKILL could
    // not stop): the others must not wait for it.
    AgentAction publish = Act(AK::kPublishMarker, s.epoch);
    publish.marker.kind = StopMarker::Kind::kNodeLeft;
    publish.marker.epoch = s.epoch;
    publish.marker.restarts = s.restarts;
    publish.marker.node = config.node_rank;
    publish.marker.exit_code = exit_code;
    publish.marker.what = "its gculaunch exited with code " + std::to_string(exit_code);
    // Stuck ranks: no return.  A signalled node, or one whose cards are unhealthy, leaves
    // and the job goes on without it (elastic) or waits for another node in its place.
    publish.marker.restartable = s.signalled_code.has_value() || !unhealthy.empty();
    if (!unhealthy.empty()) {
      publish.marker.what = "its cards are unhealthy (" + unhealthy + "); it left the job";
    }
    step.actions.push_back(std::move(publish));
    s.marker_published = true;
  }
  // A node that is not admitted (joining) is no member now: nobody to say bye to.
  const bool member = s.phase != APhase::kJoining && !s.node0_lost;
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

// Node 0's store went away, and this node joins again: the first loss of a return is told
// (not every failed attempt after it).
void TellReturn(AgentStep& step, const AgentConfig& config, const std::string& what) {
  if (step.state.returning) return;
  const std::string limit = std::to_string(config.rdzv_timeout_s);
  if (config.elected_leader) {  // the what names the leader and the cause
    Log(step, AgentAction::Level::kWarn,
        what + "; this node joins the job again under the next leader (at most " + limit +
            " s, --rdzv-timeout)");
  } else {
    Log(step, AgentAction::Level::kWarn,
        "node 0's store went away (" + what + "); this node joins again when it is back (at most " +
            limit + " s, --rdzv-timeout)");
  }
}

void OnNode0Lost(AgentStep& step, const AgentConfig& config, const std::string& what) {
  AgentState& s = step.state;
  switch (s.phase) {
    case APhase::kJoining:
      // The store went away while this node was joining: join again (the executor keeps
      // its deadline).
      TellReturn(step, config, what);
      s.returning = true;
      step.actions.push_back(Act(AK::kJoin, s.last_epoch));
      return;
    case APhase::kWaitingPlan:
      // The epoch before already re-forms the job; node 0 must come back for it.
      TellReturn(step, config, what);
      Rejoin(step);
      return;
    case APhase::kRunning:
      break;
    case APhase::kLeaving:
    case APhase::kDone:
      return;
  }
  s.node0_lost = true;
  if (s.marker) {
    // A restart was already decided: the next epoch needs node 0 back.  A final verdict
    // needs no master for its teardown.
    if (s.drained && Restartable(*s.marker, config.max_restarts)) {
      TellReturn(step, config, what);
      Rejoin(step);
    }
    return;
  }
  StopMarker lost;
  lost.kind = StopMarker::Kind::kNodeLost;
  lost.epoch = s.epoch;
  lost.restarts = s.restarts;
  lost.node = 0;
  lost.addr = config.node0_name;
  lost.what = what;
  step.actions.push_back(MarkerLog(lost, config));
  MarkerKnown(step, config, lost);
}

// Joining again, node 0 did not come back within --rdzv-timeout of its loss: the job is over
// for this node.  It is no member (its place went with the loss): no bye.
void OnRejoinDeadline(AgentStep& step, const AgentConfig& config, const std::string& what) {
  AgentState& s = step.state;
  if (s.phase != APhase::kJoining) return;
  StopMarker lost;
  lost.kind = StopMarker::Kind::kNodeLost;
  lost.epoch = s.last_epoch;
  lost.node = 0;
  lost.addr = config.node0_name;
  lost.restartable = false;
  lost.what = "it did not come back within " + std::to_string(config.rdzv_timeout_s) +
              " s (--rdzv-timeout); " + what;
  s.marker = lost;
  s.node0_lost = true;
  Log(step, AgentAction::Level::kError,
      Describe(lost) + "; this node stops (exit code " + std::to_string(exit_code::kNodeLost) +
          ")");
  Leave(step, exit_code::kNodeLost);
}

}  // namespace

AgentStep Step(const AgentState& state, const AgentConfig& config, const AgentEvent& event) {
  AgentStep step{state, {}};
  // Every marker read is told once, whatever it changes here (even after the bye).
  if (event.kind == AgentEvent::Kind::kMarker) {
    step.actions.push_back(MarkerLog(event.marker, config));
  }
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
      OnSupervisorFinished(step, config, event.exit_code, event.what);
      break;
    case AgentEvent::Kind::kNode0Lost:
      OnNode0Lost(step, config, event.what);
      break;
    case AgentEvent::Kind::kRejoinDeadline:
      OnRejoinDeadline(step, config, event.what);
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
    case AK::kLog: {
      static constexpr const char* kLevels[] = {"info", "warn", "error"};
      return "Log[" + std::string(kLevels[static_cast<int>(a.level)]) + ": " + a.text + "]";
    }
  }
  return "?";
}

namespace {

using Level = AgentAction::Level;

// A restartable marker: which restart, and how the job re-forms around what it names.
AgentAction RestartLog(const StopMarker& m, const AgentConfig& config) {
  const std::string what = Describe(m);
  const std::string restart =
      "restart " + std::to_string(RestartsOf(m) + 1) + " of " + std::to_string(config.max_restarts);
  const std::string limit = std::to_string(config.rdzv_timeout_s);
  if (m.kind == StopMarker::Kind::kNodeJoined) {
    return Say(Level::kWarn, what + "; every node stops its ranks and the job re-forms");
  }
  if (m.kind == StopMarker::Kind::kRankFailed || m.kind == StopMarker::Kind::kHang) {
    return Say(Level::kWarn, what + "; every node restarts its ranks (" + restart + ")");
  }
  if (config.elected_leader && m.kind == StopMarker::Kind::kNodeLost && m.node == 0) {
    // An elected leader: this node lost the term's leader, or the backend itself.
    return Say(Level::kWarn, what +
                                 "; this node stops its ranks and joins the job again under the "
                                 "next leader (at most " +
                                 limit + " s, --rdzv-timeout; " + restart + ")");
  }
  if (config.shrinks()) {
    return Say(Level::kWarn, what + "; the job re-forms without it if " +
                                 std::to_string(config.min_nodes) + " node(s) remain (" + restart +
                                 ")");
  }
  // A fixed size; with node ranks at rendezvous (an elected leader, c10d without node ranks:
  // MIN = MAX)
  // any node may take the lost one's place.
  return Say(Level::kWarn,
             what + "; every node stops its ranks and waits up to " + limit + " s for it " +
                 (config.min_nodes > 0 ? "or a replacement to join" : "to come back") + " (" +
                 restart + ")");
}

}  // namespace

AgentAction MarkerLog(const StopMarker& m, const AgentConfig& config) {
  const std::string what = Describe(m);
  const int max = config.max_restarts;
  if (m.kind == StopMarker::Kind::kSuccess) return Say(Level::kInfo, what);
  if (m.kind == StopMarker::Kind::kJobError && m.what.starts_with("refused: ")) {
    return Say(Level::kError,
               what + "; this node stops (exit code " + std::to_string(m.exit_code) + ")");
  }
  if (Restartable(m, max)) return RestartLog(m, config);
  const int code = ExitCodeFor(m, config.node_rank);
  std::string why;
  if (m.restartable && max > 0 && m.kind != StopMarker::Kind::kJobError) {
    why = ", no restart left (--max-restarts " + std::to_string(max) + ")";
  }
  return Say(Level::kError,
             what + "; every node stops (exit code " + std::to_string(code) + why + ")");
}

}  // namespace gculaunch::job
