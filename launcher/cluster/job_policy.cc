#include "launcher/cluster/job_policy.h"

#include "base/exit_codes.h"
#include "base/text.h"

namespace gculaunch::job {

// =================================== agent ===================================

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
StopMarker MarkerFor(const LocalStopReport& stop, int epoch, int node) {
  StopMarker m;
  m.epoch = epoch;
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

// The epoch's marker is known and its ranks are gone: restart or leave.
void Verdict(AgentStep& step, const AgentConfig& config) {
  AgentState& s = step.state;
  if (s.signalled_code) {
    Leave(step, *s.signalled_code);
    return;
  }
  if (Restartable(*s.marker, config.max_restarts)) {
    step.actions.push_back(Act(AK::kReportReaped, s.epoch));
    s.epoch += 1;
    s.phase = APhase::kWaitingPlan;
    s.stopping = false;
    s.drained = false;
    s.marker_published = false;
    s.marker.reset();
    step.actions.push_back(Act(AK::kWaitPlan, s.epoch));
    return;
  }
  Leave(step, ExitCodeFor(*s.marker, config.node_rank));
}

void OnJoined(AgentStep& step) {
  AgentState& s = step.state;
  if (s.phase != APhase::kJoining) return;
  s.phase = APhase::kWaitingPlan;
  s.epoch = 0;
  step.actions.push_back(Act(AK::kWaitPlan, 0));
}

void OnPlan(AgentStep& step, const AgentConfig& config, const JobPlan& plan) {
  AgentState& s = step.state;
  if (s.phase != APhase::kWaitingPlan || plan.epoch != s.epoch) return;
  if (plan.abort) {
    s.marker = *plan.abort;
    Leave(step, ExitCodeFor(*plan.abort, config.node_rank));
    return;
  }
  s.phase = APhase::kRunning;
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
  if (!s.marker && !s.marker_published) {
    AgentAction publish = Act(AK::kPublishMarker, s.epoch);
    publish.marker = MarkerFor(stop, s.epoch, config.node_rank);
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
  if (s.phase == APhase::kRunning && !s.marker && !s.marker_published) {
    // The node leaves on its own (a signal during the drain, ranks that SIGKILL could
    // not stop): the others must not wait for it.
    AgentAction publish = Act(AK::kPublishMarker, s.epoch);
    publish.marker.kind = StopMarker::Kind::kNodeLeft;
    publish.marker.epoch = s.epoch;
    publish.marker.node = config.node_rank;
    publish.marker.exit_code = exit_code;
    publish.marker.what = "its gculaunch exited with code " + std::to_string(exit_code);
    step.actions.push_back(std::move(publish));
    s.marker_published = true;
  }
  // A node that never joined is no member: it has nobody to say bye to.
  const bool member = s.phase != APhase::kJoining;
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
  if (s.phase == APhase::kJoining || s.phase == APhase::kLeaving) return;
  // A final verdict is already known: the teardown needs no master.
  if (s.phase == APhase::kRunning && s.marker && !Restartable(*s.marker, config.max_restarts)) {
    return;
  }
  StopMarker lost;
  lost.kind = StopMarker::Kind::kNodeLost;
  lost.epoch = s.epoch;
  lost.node = 0;
  lost.host = config.master_host;
  lost.addr = config.master_addr;
  lost.what = what;
  if (s.phase == APhase::kWaitingPlan) {
    s.marker = lost;
    Leave(step, exit_code::kNodeLost);
    return;
  }
  MarkerKnown(step, config, lost);
}

}  // namespace

AgentStep Step(const AgentState& state, const AgentConfig& config, const AgentEvent& event) {
  AgentStep step{state, {}};
  if (step.state.phase == APhase::kDone) return step;
  switch (event.kind) {
    case AgentEvent::Kind::kJoined:
      OnJoined(step);
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

// ================================= coordinator =================================

CoordinatorEvent CoordinatorEvent::Registered(NodeRegistration reg) {
  CoordinatorEvent e{Kind::kRegistered};
  e.node = reg.node_rank;
  e.reg = std::move(reg);
  return e;
}
CoordinatorEvent CoordinatorEvent::BadRegistration(int node, std::string what) {
  CoordinatorEvent e{Kind::kBadRegistration};
  e.node = node;
  e.what = std::move(what);
  return e;
}
CoordinatorEvent CoordinatorEvent::Done(int epoch, int node) {
  CoordinatorEvent e{Kind::kDone};
  e.epoch = epoch;
  e.node = node;
  return e;
}
CoordinatorEvent CoordinatorEvent::Reaped(int epoch, int node) {
  CoordinatorEvent e{Kind::kReaped};
  e.epoch = epoch;
  e.node = node;
  return e;
}
CoordinatorEvent CoordinatorEvent::Marker(StopMarker marker) {
  CoordinatorEvent e{Kind::kMarker};
  e.epoch = marker.epoch;
  e.marker = std::move(marker);
  return e;
}
CoordinatorEvent CoordinatorEvent::Bye(int node, int exit_code) {
  CoordinatorEvent e{Kind::kBye};
  e.node = node;
  e.exit_code = exit_code;
  return e;
}
CoordinatorEvent CoordinatorEvent::NodeSilent(int node, std::string what) {
  CoordinatorEvent e{Kind::kNodeSilent};
  e.node = node;
  e.what = std::move(what);
  return e;
}

std::string JoinNodes(const std::vector<int>& nodes) {
  std::vector<std::string> names;
  for (int node : nodes) names.push_back(std::to_string(node));
  return JoinAnd(names);
}

namespace {

using CK = CoordinatorAction::Kind;
using CPhase = CoordinatorState::Phase;

CoordinatorAction CAct(CK kind, int epoch = 0) {
  CoordinatorAction a{kind};
  a.epoch = epoch;
  return a;
}

std::vector<NodeRegistration> Registrations(const CoordinatorState& s) {
  std::vector<NodeRegistration> regs;
  for (const auto& [node, reg] : s.regs) regs.push_back(reg);
  return regs;
}

// Every registered node said bye or is lost: the store may stop.
void MaybeFinish(CoordinatorStep& step) {
  CoordinatorState& s = step.state;
  for (const auto& [node, reg] : s.regs) {
    if (s.bye.count(node) == 0 && s.lost.count(node) == 0) return;
  }
  s.phase = CPhase::kDone;
  step.actions.push_back(CAct(CK::kFinish, s.epoch));
}

// Epoch `epoch` will never run: its plan carries the reason, and the job ends.
void AbortPlan(CoordinatorStep& step, int epoch, StopMarker reason) {
  reason.epoch = epoch;
  CoordinatorAction a = CAct(CK::kPublishPlan, epoch);
  a.plan.epoch = epoch;
  a.plan.abort = std::move(reason);
  step.actions.push_back(std::move(a));
  step.state.phase = CPhase::kFinishing;
  MaybeFinish(step);
}

StopMarker JobError(int code, const std::string& what) {
  StopMarker m;
  m.kind = StopMarker::Kind::kJobError;
  m.exit_code = code;
  m.what = what;
  m.restartable = false;
  return m;
}

void StartEpoch(CoordinatorStep& step, int epoch) {
  CoordinatorState& s = step.state;
  s.epoch = epoch;
  s.done.clear();
  s.reaped.clear();
  s.marker.reset();
  s.marker_published = false;
  s.phase = CPhase::kRunning;
  CoordinatorAction plan = CAct(CK::kPublishPlan, epoch);
  plan.plan = MakePlan(Registrations(s), epoch, 0);
  step.actions.push_back(std::move(plan));
  step.actions.push_back(CAct(CK::kWatchEpoch, epoch));
}

// In kRestarting: once every node reaped the epoch's ranks, the next epoch starts.
void MaybeRestart(CoordinatorStep& step) {
  CoordinatorState& s = step.state;
  for (const auto& [node, reg] : s.regs) {
    if (s.reaped.count(node) == 0) return;
  }
  const int next = s.epoch + 1;
  step.actions.push_back(CAct(CK::kBeginAttempt, next));
  StartEpoch(step, next);
}

// Node `node` is gone (silent, or left before the job was over), described by `m`.
void NodeGone(CoordinatorStep& step, int node, StopMarker m) {
  CoordinatorState& s = step.state;
  s.lost.insert(node);
  auto reg = s.regs.find(node);
  if (reg != s.regs.end()) {
    m.host = reg->second.host;
    m.addr = reg->second.addr;
  }
  m.node = node;
  m.restartable = false;
  switch (s.phase) {
    case CPhase::kGathering:
      AbortPlan(step, 0, std::move(m));
      break;
    case CPhase::kRunning:
      if (!s.marker && !s.marker_published) {
        m.epoch = s.epoch;
        CoordinatorAction publish = CAct(CK::kPublishMarker, s.epoch);
        publish.marker = std::move(m);
        step.actions.push_back(std::move(publish));
        s.marker_published = true;
      }
      break;
    case CPhase::kRestarting:
      AbortPlan(step, s.epoch + 1, std::move(m));
      break;
    case CPhase::kFinishing: {
      // Every node logs markers and aborts itself; only this case has no other voice.
      CoordinatorAction log = CAct(CK::kLogLost, s.epoch);
      log.text = Describe(m) + " before it said bye";
      step.actions.push_back(std::move(log));
      MaybeFinish(step);
      break;
    }
    case CPhase::kDone:
      break;
  }
}

std::vector<int> Missing(const CoordinatorState& s, int nnodes, const std::set<int>& have) {
  std::vector<int> missing;
  for (int k = 0; k < nnodes; ++k) {
    if (have.count(k) == 0 && s.lost.count(k) == 0) missing.push_back(k);
  }
  return missing;
}

// "node 3" or "nodes 1, 2 and 5".
std::string NodesNamed(const std::vector<int>& nodes) {
  return std::string(nodes.size() == 1 ? "node " : "nodes ") + JoinNodes(nodes);
}

// The nodes that have not registered and are not known to be lost.
std::vector<int> Unregistered(const CoordinatorState& s, int nnodes) {
  std::set<int> present;
  for (const auto& [node, reg] : s.regs) present.insert(node);
  return Missing(s, nnodes, present);
}

void OnRegistered(CoordinatorStep& step, const CoordinatorConfig& config,
                  const NodeRegistration& reg) {
  CoordinatorState& s = step.state;
  if (s.phase != CPhase::kGathering) return;
  // Node 0's own registration (with its address) once it is in, for the messages.
  const NodeRegistration& master = s.regs.count(0) != 0 ? s.regs.at(0) : config.master;
  if (auto ok = CheckRegistration(reg, master); !ok.ok()) {
    s.regs[reg.node_rank] = reg;  // it waits for plan 0 and must say bye
    AbortPlan(step, 0,
              JobError(exit_code::kUsage, ok.error().what + " (fix: " + ok.error().hint + ")"));
    return;
  }
  s.regs[reg.node_rank] = reg;
  if (static_cast<int>(s.regs.size()) == config.nnodes) StartEpoch(step, 0);
}

void OnBadRegistration(CoordinatorStep& step, int node, const std::string& what) {
  CoordinatorState& s = step.state;
  if (s.phase != CPhase::kGathering) return;
  s.regs[node].node_rank = node;  // it waits for plan 0 and must say bye
  AbortPlan(step, 0,
            JobError(exit_code::kUsage,
                     "node " + std::to_string(node) + " registered with an unreadable " + what));
}

void OnRendezvousTimeout(CoordinatorStep& step, const CoordinatorConfig& config) {
  if (step.state.phase != CPhase::kGathering) return;
  const std::vector<int> missing = Unregistered(step.state, config.nnodes);
  AbortPlan(step, 0,
            JobError(exit_code::kRendezvousFailed,
                     NodesNamed(missing) + " of " + std::to_string(config.nnodes) +
                         " did not join within " + std::to_string(config.rdzv_timeout_s) +
                         " s (fix: start gculaunch on every node with the same "
                         "MASTER_ADDR and MASTER_PORT, or raise --rdzv-timeout)"));
}

// Every 10 s: what the current phase still waits for, if anything.
void OnMissingTick(CoordinatorStep& step, const CoordinatorConfig& config) {
  const CoordinatorState& s = step.state;
  std::vector<int> missing;
  std::string text;
  if (s.phase == CPhase::kGathering) {
    missing = Unregistered(s, config.nnodes);
    text = "waiting for " + NodesNamed(missing) + " to join (" + std::to_string(s.regs.size()) +
           " of " + std::to_string(config.nnodes) + " present)";
  } else if (s.phase == CPhase::kRestarting) {
    missing = Missing(s, config.nnodes, s.reaped);
    text = "waiting for " + NodesNamed(missing) + " to stop their ranks before restart " +
           std::to_string(s.epoch + 1);
  } else if (s.phase == CPhase::kFinishing) {
    for (const auto& [node, reg] : s.regs) {
      if (s.bye.count(node) == 0 && s.lost.count(node) == 0) missing.push_back(node);
    }
    text = "waiting for " + NodesNamed(missing) + " to finish";
  }
  if (missing.empty()) return;
  CoordinatorAction log = CAct(CK::kLogMissing, s.epoch);
  log.text = std::move(text);
  step.actions.push_back(std::move(log));
}

void OnDone(CoordinatorStep& step, const CoordinatorConfig& config, int epoch, int node) {
  CoordinatorState& s = step.state;
  if (s.phase != CPhase::kRunning || epoch != s.epoch) return;
  s.done.insert(node);
  if (static_cast<int>(s.done.size()) == config.nnodes && !s.marker && !s.marker_published) {
    CoordinatorAction publish = CAct(CK::kPublishMarker, s.epoch);
    publish.marker.kind = StopMarker::Kind::kSuccess;
    publish.marker.epoch = s.epoch;
    publish.marker.restartable = false;
    publish.marker.what = "every node's ranks exited 0";
    step.actions.push_back(std::move(publish));
    s.marker_published = true;
  }
}

void OnReaped(CoordinatorStep& step, int epoch, int node) {
  CoordinatorState& s = step.state;
  if (epoch != s.epoch) return;
  if (s.phase != CPhase::kRunning && s.phase != CPhase::kRestarting) return;
  s.reaped.insert(node);
  if (s.phase == CPhase::kRestarting) MaybeRestart(step);
}

void OnMarker(CoordinatorStep& step, const CoordinatorConfig& config, const StopMarker& marker) {
  CoordinatorState& s = step.state;
  if (s.phase != CPhase::kRunning || marker.epoch != s.epoch || s.marker) return;
  s.marker = marker;
  if (!Restartable(marker, config.max_restarts)) {
    s.phase = CPhase::kFinishing;
    MaybeFinish(step);
    return;
  }
  s.phase = CPhase::kRestarting;
  if (s.lost.empty()) {
    MaybeRestart(step);
    return;
  }
  // A node went away while the epoch stopped: the job cannot re-form.
  const int node = *s.lost.begin();
  StopMarker m;
  m.kind = StopMarker::Kind::kNodeLost;
  m.node = node;
  if (auto reg = s.regs.find(node); reg != s.regs.end()) {
    m.host = reg->second.host;
    m.addr = reg->second.addr;
  }
  m.what = "it went away before the restart";
  m.restartable = false;
  AbortPlan(step, s.epoch + 1, std::move(m));
}

void OnBye(CoordinatorStep& step, int node, int exit_code) {
  CoordinatorState& s = step.state;
  if (s.bye.count(node) != 0) return;
  s.bye.insert(node);
  if (s.phase == CPhase::kFinishing) {
    MaybeFinish(step);
    return;
  }
  if (s.lost.count(node) != 0) return;
  StopMarker m;
  m.kind = StopMarker::Kind::kNodeLeft;
  m.exit_code = exit_code;
  m.what = "its gculaunch exited with code " + std::to_string(exit_code);
  NodeGone(step, node, std::move(m));
}

void OnNodeSilent(CoordinatorStep& step, int node, const std::string& what) {
  const CoordinatorState& s = step.state;
  if (s.bye.count(node) != 0 || s.lost.count(node) != 0) return;
  StopMarker m;
  m.kind = StopMarker::Kind::kNodeLost;
  m.what = what;
  NodeGone(step, node, std::move(m));
}

}  // namespace

CoordinatorStep Step(const CoordinatorState& state, const CoordinatorConfig& config,
                     const CoordinatorEvent& event) {
  CoordinatorStep step{state, {}};
  if (step.state.phase == CPhase::kDone) return step;
  switch (event.kind) {
    case CoordinatorEvent::Kind::kRegistered:
      OnRegistered(step, config, event.reg);
      break;
    case CoordinatorEvent::Kind::kBadRegistration:
      OnBadRegistration(step, event.node, event.what);
      break;
    case CoordinatorEvent::Kind::kRendezvousTimeout:
      OnRendezvousTimeout(step, config);
      break;
    case CoordinatorEvent::Kind::kMissingTick:
      OnMissingTick(step, config);
      break;
    case CoordinatorEvent::Kind::kDone:
      OnDone(step, config, event.epoch, event.node);
      break;
    case CoordinatorEvent::Kind::kReaped:
      OnReaped(step, event.epoch, event.node);
      break;
    case CoordinatorEvent::Kind::kMarker:
      OnMarker(step, config, event.marker);
      break;
    case CoordinatorEvent::Kind::kBye:
      OnBye(step, event.node, event.exit_code);
      break;
    case CoordinatorEvent::Kind::kNodeSilent:
      OnNodeSilent(step, event.node, event.what);
      break;
  }
  return step;
}

std::string ActionName(const CoordinatorAction& a) {
  const std::string e = "(" + std::to_string(a.epoch) + ")";
  switch (a.kind) {
    case CK::kPublishPlan:
      return std::string(a.plan.abort ? "PublishAbort" : "PublishPlan") + e;
    case CK::kBeginAttempt:
      return "BeginAttempt" + e;
    case CK::kPublishMarker:
      return "PublishMarker" + e + "[" + KindName(a.marker.kind) + "]";
    case CK::kWatchEpoch:
      return "WatchEpoch" + e;
    case CK::kLogMissing:
      return "LogMissing[" + a.text + "]";
    case CK::kLogLost:
      return "LogLost[" + a.text + "]";
    case CK::kFinish:
      return "Finish";
  }
  return "?";
}

}  // namespace gculaunch::job
