#include "launcher/cluster/coordinator_policy.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "base/exit_codes.h"
#include "base/text.h"

namespace gculaunch::job {

CoordinatorEvent CoordinatorEvent::Join(int seq, NodeRegistration reg) {
  CoordinatorEvent e{Kind::kJoin};
  e.node = reg.node_rank;
  e.seq = seq;
  e.reg = std::move(reg);
  return e;
}
CoordinatorEvent CoordinatorEvent::BadJoin(int node, int seq, std::string what) {
  CoordinatorEvent e{Kind::kBadJoin};
  e.node = node;
  e.seq = seq;
  e.what = std::move(what);
  return e;
}
CoordinatorEvent CoordinatorEvent::Done(int epoch, int node) {
  CoordinatorEvent e{Kind::kDone};
  e.epoch = epoch;
  e.node = node;
  return e;
}
CoordinatorEvent CoordinatorEvent::Reaped(int epoch, int node, AttemptReport report) {
  CoordinatorEvent e{Kind::kReaped};
  e.epoch = epoch;
  e.node = node;
  e.report = std::move(report);
  return e;
}
CoordinatorEvent CoordinatorEvent::Marker(StopMarker marker, double ran_s) {
  CoordinatorEvent e{Kind::kMarker};
  e.epoch = marker.epoch;
  e.marker = std::move(marker);
  e.ran_s = ran_s;
  return e;
}

CoordinatorEvent CoordinatorEvent::BackoffOver(int epoch) {
  CoordinatorEvent e{Kind::kBackoffOver};
  e.epoch = epoch;
  return e;
}
CoordinatorEvent CoordinatorEvent::Bye(int node, int seq, int exit_code) {
  CoordinatorEvent e{Kind::kBye};
  e.node = node;
  e.seq = seq;
  e.exit_code = exit_code;
  return e;
}
CoordinatorEvent CoordinatorEvent::NodeSilent(int node, int seq, std::string what) {
  CoordinatorEvent e{Kind::kNodeSilent};
  e.node = node;
  e.seq = seq;
  e.what = std::move(what);
  return e;
}
CoordinatorEvent CoordinatorEvent::RejoinTimeout(int node) {
  CoordinatorEvent e{Kind::kRejoinTimeout};
  e.node = node;
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

void Log(CoordinatorStep& step, std::string text) {
  CoordinatorAction log = CAct(CK::kLog, step.state.epoch);
  log.text = std::move(text);
  step.actions.push_back(std::move(log));
}

void Admit(CoordinatorStep& step, int node, int seq, const JobPlan& plan) {
  CoordinatorAction a = CAct(CK::kAdmit, plan.epoch);
  a.node = node;
  a.seq = seq;
  a.plan = plan;
  step.actions.push_back(std::move(a));
}

std::string NameOf(const Member& m) { return NodeName(m.reg.node_rank, m.reg.host, m.reg.addr); }

// Every member said bye or is away: the store may stop.
void MaybeFinish(CoordinatorStep& step) {
  CoordinatorState& s = step.state;
  for (const auto& [node, m] : s.members) {
    if (s.bye.count(node) == 0 && !m.away) return;
  }
  s.phase = CPhase::kDone;
  step.actions.push_back(CAct(CK::kFinish, s.epoch));
}

// Epoch `epoch` will never run: its plan, and the admission of every node still waiting for
// one, carry the reason; the job ends.
void AbortAll(CoordinatorStep& step, int epoch, StopMarker reason) {
  CoordinatorState& s = step.state;
  reason.epoch = epoch;
  reason.restartable = false;
  JobPlan abort;
  abort.epoch = epoch;
  abort.abort = std::move(reason);
  CoordinatorAction a = CAct(CK::kPublishPlan, epoch);
  a.plan = abort;
  step.actions.push_back(std::move(a));
  for (auto& [node, m] : s.members) {
    if (m.admitted || m.away) continue;
    Admit(step, node, m.seq, abort);
    m.admitted = true;
  }
  s.phase = CPhase::kFinishing;
  MaybeFinish(step);
}

// A join request answered with "no": the node exits with code 2, the job goes on.
void Refuse(CoordinatorStep& step, int node, int seq, const Error& why) {
  JobPlan refusal;
  refusal.epoch = step.state.epoch;
  refusal.abort = StopMarker{};
  refusal.abort->kind = StopMarker::Kind::kJobError;
  refusal.abort->exit_code = exit_code::kUsage;
  refusal.abort->restartable = false;
  refusal.abort->what = "refused: " + why.what + " (fix: " + why.hint + ")";
  Admit(step, node, seq, refusal);
  Log(step, "refused a join request for node " + std::to_string(node) + ": " + why.what);
}

StopMarker JobError(int code, const std::string& what) {
  StopMarker m;
  m.kind = StopMarker::Kind::kJobError;
  m.exit_code = code;
  m.what = what;
  m.restartable = false;
  return m;
}

// Elastic: the members of the next epoch in node-rank order.  Those of the last plan keep
// their order (the store host, id 0, is always first); new ones follow by id, up to MAX.
// Members that are away are dropped: the job re-forms without them.
std::vector<int> NextOrder(CoordinatorState& s, const CoordinatorConfig& config) {
  std::erase_if(s.members, [&s](const auto& m) {
    if (m.second.away) s.roster.push_back(m.first);
    return m.second.away;
  });
  if (config.fixed_at_rendezvous() && !s.order.empty()) {
    // A fixed size: members keep their node ranks; newcomers fill the vacated ones by id.
    std::vector<int> slots;
    for (int id : s.order) slots.push_back(s.members.count(id) != 0 ? id : -1);
    for (const auto& [id, m] : s.members) {
      if (std::find(slots.begin(), slots.end(), id) != slots.end()) continue;
      auto hole = std::find(slots.begin(), slots.end(), -1);
      if (hole != slots.end()) {
        *hole = id;
      } else if (static_cast<int>(slots.size()) < config.nnodes) {
        slots.push_back(id);
      }
    }
    std::erase(slots, -1);
    return slots;
  }
  std::vector<int> order;
  for (int id : s.order) {
    if (s.members.count(id) != 0) order.push_back(id);
  }
  for (const auto& [id, m] : s.members) {
    if (static_cast<int>(order.size()) >= config.nnodes) break;
    if (std::find(order.begin(), order.end(), id) == order.end()) order.push_back(id);
  }
  return order;
}

// A fixed size at rendezvous: a member that has no place in the plan is refused, in one line
// on its node, instead of waiting for room that a fixed-size job never makes.
void RefuseBeyondFull(CoordinatorStep& step, const CoordinatorConfig& config) {
  CoordinatorState& s = step.state;
  std::vector<int> beyond;
  for (const auto& [id, m] : s.members) {
    if (std::find(s.order.begin(), s.order.end(), id) == s.order.end()) beyond.push_back(id);
  }
  for (int id : beyond) {
    Refuse(step, id, s.members.at(id).seq,
           Error{"the job is full: its " + std::to_string(config.nnodes) + " nodes (--nnodes " +
                     std::to_string(config.nnodes) + ") have joined",
                 "start at most " + std::to_string(config.nnodes) +
                     " nodes with this rendezvous endpoint and id, or use --nnodes MIN:MAX to "
                     "keep spare nodes"});
    s.members.erase(id);
    s.roster.push_back(id);
  }
}

void StartEpoch(CoordinatorStep& step, const CoordinatorConfig& config, int epoch, int restarts) {
  CoordinatorState& s = step.state;
  s.epoch = epoch;
  s.restarts = restarts;
  s.ran = true;
  s.done.clear();
  s.reaped.clear();
  s.restart_ready = 0;
  s.marker.reset();
  s.marker_published = false;
  s.reports.clear();
  s.streak_checked = false;
  const double waited = s.backoff_s;
  s.backoff_s = 0;
  s.backoff_armed = false;
  s.backoff_over = false;
  s.phase = CPhase::kRunning;
  if (config.elastic()) {
    s.order = NextOrder(s, config);
  } else {
    s.order.clear();
    for (const auto& [node, m] : s.members) s.order.push_back(node);
  }
  if (config.fixed_at_rendezvous()) RefuseBeyondFull(step, config);
  std::vector<NodeRegistration> regs;
  for (int node : s.order) regs.push_back(s.members.at(node).reg);
  CoordinatorAction plan = CAct(CK::kPublishPlan, epoch);
  plan.plan = MakeOrderedPlan(regs, epoch, 0);
  plan.plan.restarts = restarts;
  plan.plan.backoff_s = waited;
  // The admissions name the plan just published rather than carry a copy each (kAdmit).
  JobPlan published;
  published.epoch = epoch;
  published.restarts = restarts;
  step.actions.push_back(std::move(plan));
  for (int node : s.order) {
    Member& m = s.members.at(node);
    if (m.admitted) continue;
    Admit(step, node, m.seq, published);
    m.admitted = true;
  }
  step.actions.push_back(CAct(CK::kWatchEpoch, epoch));
}

int Present(const CoordinatorState& s) {
  return static_cast<int>(std::count_if(s.members.begin(), s.members.end(),
                                        [](const auto& m) { return !m.second.away; }));
}

// The restarts the joined nodes had used (node 0 came back): the most any of them reports.
int AdoptedRestarts(const CoordinatorState& s) {
  int most = -1;
  for (const auto& [node, m] : s.members) {
    most = std::max(most, m.reg.last_restarts >= 0 ? m.reg.last_restarts : m.reg.last_epoch);
  }
  return most;
}

// Whether every node 0..n-1 is a member that is not away.  O(1) until the last one joined: a
// walk on every join would cost a job of N nodes O(N^2) while it gathers.
bool AllPresent(const CoordinatorState& s, int nnodes) {
  if (static_cast<int>(s.members.size()) < nnodes) return false;
  for (int k = 0; k < nnodes; ++k) {
    auto m = s.members.find(k);
    if (m == s.members.end() || m->second.away) return false;
  }
  return true;
}

// Elastic, kGathering: whether enough nodes are in.  MAX present starts at once; MIN arms the
// last call (once), and the job starts when it passed.
bool ElasticReady(CoordinatorStep& step, const CoordinatorConfig& config) {
  CoordinatorState& s = step.state;
  const int present = Present(s);
  if (present >= config.nnodes) return true;
  if (present < config.min_nodes) return false;
  if (!s.last_call) {
    s.last_call = true;
    step.actions.push_back(CAct(CK::kArmLastCall, s.epoch));
    Log(step, std::to_string(present) + " of " + std::to_string(config.min_nodes) + ":" +
                  std::to_string(config.nnodes) +
                  " nodes present: the job starts when all have joined, or in " +
                  std::to_string(config.last_call_s) + " s (last_call_timeout)");
  }
  return s.last_call_passed;
}

// kGathering: everyone is in.  A new node 0 resumes after the highest epoch any node ran.
void MaybeStart(CoordinatorStep& step, const CoordinatorConfig& config) {
  CoordinatorState& s = step.state;
  if (config.elastic() ? !ElasticReady(step, config) : !AllPresent(s, config.nnodes)) return;
  const int first = s.adopted + 1;
  if (first == 0) {
    StartEpoch(step, config, 0, 0);
    return;
  }
  const int restarts = AdoptedRestarts(s) + 1;
  if (restarts > config.max_restarts) {
    StopMarker m;
    m.kind = StopMarker::Kind::kNodeLost;
    m.node = 0;
    m.host = config.node0.host;
    m.addr = config.node0.addr;
    m.what = std::string(config.elected_leader ? "a new leader took over" : "it came back") +
             ", but the job has used all " + std::to_string(config.max_restarts) + " restart(s)";
    AbortAll(step, first, std::move(m));
    return;
  }
  const std::string ran = " (the nodes ran epoch " + std::to_string(s.adopted);
  Log(step, config.elected_leader
                ? "this node took over as the job's leader: resuming the job at epoch " +
                      std::to_string(first) + ran + " under the previous leader)"
                : "node 0 came back: resuming the job at epoch " + std::to_string(first) + ran +
                      " with the previous node 0)");
  step.actions.push_back(CAct(CK::kBeginAttempt, first));
  StartEpoch(step, config, first, restarts);
}

// The failure streak (failure_streak.h) for the whole job, once every node reaped epoch
// `next` - 1: the failing node's signature and the highest progress number any node read.
// True when it ends the job: epoch `next` is aborted on every node, which exits with the
// failed rank's code.
bool StopLoop(CoordinatorStep& step, const CoordinatorConfig& config, int next) {
  CoordinatorState& s = step.state;
  AttemptEnd end;
  end.rank_failed = s.marker && s.marker->kind == StopMarker::Kind::kRankFailed;
  end.ran_s = s.ran_s;
  if (end.rank_failed) {
    if (auto r = s.reports.find(s.marker->node); r != s.reports.end()) {
      end.report.signature = r->second.signature;
    }
    for (const auto& [node, r] : s.reports) {
      if (r.progress && (!end.report.progress || *r.progress > *end.report.progress)) {
        end.report.progress = r.progress;
      }
    }
  }
  const StreakStep streak = NextStreak(s.streak, config.streak, end);
  s.streak = streak.state;
  if (!streak.stop) return false;
  StopMarker m = *s.marker;
  m.kind = StopMarker::Kind::kSameFailure;
  m.what = streak.stop->Line();
  AbortAll(step, next, std::move(m));
  return true;
}

// A member named in `roster` may no longer be ready: MaybeRestart looks at it again.
void LowerRestartReady(CoordinatorState& s) {
  for (int k : s.roster) s.restart_ready = std::min(s.restart_ready, k);
}

// In kRestarting: once every node is back and reaped its ranks, the next epoch starts.
// Elastic: a node joining is free; a fixed-size job has no joins, so restarts = epoch there.
void MaybeRestart(CoordinatorStep& step, const CoordinatorConfig& config) {
  CoordinatorState& s = step.state;
  if (config.elastic()) {
    for (int k : s.order) {
      auto m = s.members.find(k);
      if (m != s.members.end() && !m->second.away && s.reaped.count(k) == 0) return;
    }
    if (Present(s) < config.min_nodes) return;  // waits for joins (RejoinTimeout bounds it)
  } else {
    LowerRestartReady(s);
    for (int k = s.restart_ready; k < config.nnodes; ++k) {
      auto m = s.members.find(k);
      // A node admitted for this epoch reports its reap; one that came back has none running.
      if (m == s.members.end() || m->second.away ||
          (m->second.admitted && s.reaped.count(k) == 0)) {
        s.restart_ready = k;
        return;
      }
    }
    s.restart_ready = config.nnodes;
  }
  const bool free = s.marker && s.marker->kind == StopMarker::Kind::kNodeJoined;
  const int next = s.epoch + 1;
  if (!s.streak_checked) {
    s.streak_checked = true;
    if (!free && StopLoop(step, config, next)) return;
  }
  if (s.backoff_s > 0 && !s.backoff_over) {  // a crash loop: every node waits the same
    if (s.backoff_armed) return;             // BackoffOver starts it
    s.backoff_armed = true;
    CoordinatorAction wait = CAct(CK::kArmBackoff, next);
    wait.delay_s = s.backoff_s;
    if (s.marker) wait.marker = *s.marker;
    step.actions.push_back(std::move(wait));
    return;
  }
  step.actions.push_back(CAct(CK::kBeginAttempt, next));
  StartEpoch(step, config, next, free ? s.restarts : s.restarts + 1);
}

bool InPlan(const CoordinatorState& s, int node) {
  return std::find(s.order.begin(), s.order.end(), node) != s.order.end();
}

// Member `node` is gone (silent, hung up, or left), described by `m`.
void NodeGone(CoordinatorStep& step, const CoordinatorConfig& config, int node, StopMarker m) {
  CoordinatorState& s = step.state;
  auto it = s.members.find(node);
  if (it == s.members.end() || it->second.away) return;
  Member& member = it->second;
  m.node = node;
  m.host = member.reg.host;
  m.addr = member.reg.addr;
  if (config.elastic() && s.phase != CPhase::kGathering && s.phase != CPhase::kDone &&
      !InPlan(s, node)) {
    // A node waiting for room in a full job: nothing runs on it, the job does not notice.
    Log(step, Describe(m) + " while it waited for room in the job");
    s.members.erase(it);
    s.roster.push_back(node);
    return;
  }
  switch (s.phase) {
    case CPhase::kGathering:
      Log(step, Describe(m) + " before the job started; waiting for it to join again");
      s.members.erase(it);
      s.roster.push_back(node);
      return;
    case CPhase::kRunning:
      member.away = true;
      member.gone = m;
      s.roster.push_back(node);
      if (!s.marker && !s.marker_published) {
        m.epoch = s.epoch;
        m.restarts = s.restarts;
        CoordinatorAction publish = CAct(CK::kPublishMarker, s.epoch);
        publish.marker = std::move(m);
        step.actions.push_back(std::move(publish));
        s.marker_published = true;
      }
      return;
    case CPhase::kRestarting: {
      member.away = true;
      member.gone = m;
      s.roster.push_back(node);
      std::string text =
          Describe(m) + (config.fixed_at_rendezvous()
                             ? " while the job re-forms; it waits for a node to take its place"
                         : config.elastic()
                             ? " while the job re-forms; it re-forms without it"
                             : " while the job re-forms; it waits for it to come back");
      if (s.marker && s.marker->kind == StopMarker::Kind::kRankFailed) {
        // Survivors' ranks fail first when a node dies mid-collective (their peer is gone).
        text +=
            " (" + Describe(*s.marker) + " first: taken as a consequence, one restart for both)";
      }
      Log(step, text);
      if (config.elastic()) MaybeRestart(step, config);
      return;
    }
    case CPhase::kFinishing:
      member.away = true;
      member.gone = m;
      s.roster.push_back(node);
      // Every node logs markers and aborts itself; only this case has no other voice.
      Log(step, Describe(m) + " before it said bye");
      MaybeFinish(step);
      return;
    case CPhase::kDone:
      return;
  }
}

std::vector<int> Unjoined(const CoordinatorState& s, int nnodes) {
  std::vector<int> missing;
  for (int k = 0; k < nnodes; ++k) {
    if (s.members.count(k) == 0) missing.push_back(k);
  }
  return missing;
}

// "node 3" or "nodes 1, 2 and 5".
std::string NodesNamed(const std::vector<int>& nodes) {
  return std::string(nodes.size() == 1 ? "node " : "nodes ") + JoinNodes(nodes);
}

// A join request from a node whose node rank has a member that is not away.
// Returns whether the request may go on (as a return after an unnoticed loss).
bool Occupied(CoordinatorStep& step, const CoordinatorConfig& config, int seq,
              const NodeRegistration& reg) {
  CoordinatorState& s = step.state;
  Member& cur = s.members.at(reg.node_rank);
  if (cur.reg.incarnation != reg.incarnation) {
    std::string what = "node rank " + std::to_string(reg.node_rank) + " is already taken by " +
                       NameOf(cur) + " (pid " + std::to_string(cur.reg.pid) + ")";
    if (reg.last_epoch >= 0) what += ": this gculaunch was replaced while it was away";
    Refuse(step, reg.node_rank, seq,
           Error{what, "give every node a distinct node rank (RANK / --node-rank)"});
    return false;
  }
  if (!cur.admitted) {  // the same gculaunch asks again before the job started
    cur.seq = seq;
    cur.reg = reg;
    s.roster.push_back(reg.node_rank);
    return false;
  }
  // The same gculaunch joins again: it lost node 0 before node 0 noticed.
  StopMarker m;
  m.kind = StopMarker::Kind::kNodeLost;
  m.what = "its connection to node 0 broke";
  NodeGone(step, config, reg.node_rank, std::move(m));
  return true;
}

// Elastic: a node joined while an epoch runs.  Below MAX the job re-forms to take it in (a
// node_joined marker, which costs no restart); at MAX it waits for room.
void ElasticArrival(CoordinatorStep& step, const CoordinatorConfig& config, int node) {
  CoordinatorState& s = step.state;
  const Member& m = s.members.at(node);
  if (static_cast<int>(s.order.size()) >= config.nnodes) {
    if (config.fixed_at_rendezvous()) {
      RefuseBeyondFull(step, config);
      return;
    }
    Log(step, NameOf(m) + " waits for room: the job runs its maximum of " +
                  std::to_string(config.nnodes) + " nodes");
    return;
  }
  if (s.marker || s.marker_published) return;  // the epoch ends anyway; the re-form takes it
  CoordinatorAction publish = CAct(CK::kPublishMarker, s.epoch);
  publish.marker.kind = StopMarker::Kind::kNodeJoined;
  publish.marker.epoch = s.epoch;
  publish.marker.restarts = s.restarts;
  publish.marker.node = node;
  publish.marker.host = m.reg.host;
  publish.marker.addr = m.reg.addr;
  publish.marker.what =
      "the job re-forms with " + std::to_string(s.order.size() + 1) + " nodes (no restart used)";
  step.actions.push_back(std::move(publish));
  s.marker_published = true;
}

void OnJoin(CoordinatorStep& step, const CoordinatorConfig& config, int seq,
            const NodeRegistration& reg) {
  CoordinatorState& s = step.state;
  const int node = reg.node_rank;
  // Node 0's own registration (with its address) once it is in, for the messages.
  const NodeRegistration& node0 = s.members.count(0) != 0 ? s.members.at(0).reg : config.node0;
  if (auto id = CheckIdentity(reg, node0); !id.ok()) {
    Refuse(step, node, seq, id.error());
    return;
  }
  if (s.phase == CPhase::kFinishing) {
    JobPlan over;
    over.epoch = s.epoch;
    over.abort = s.marker ? *s.marker : JobError(exit_code::kNodeLost, "the job is ending");
    over.abort->restartable = false;
    Admit(step, node, seq, over);
    return;
  }
  auto cur = s.members.find(node);
  if (cur != s.members.end() && !cur->second.away && !Occupied(step, config, seq, reg)) return;
  if (auto fits = CheckRegistration(reg, node0); !fits.ok()) {
    if (s.phase == CPhase::kGathering && !s.ran && s.adopted < 0 && reg.last_epoch < 0) {
      // A misconfigured member at the start ends the job on every node (exit code 2).
      s.members[node] = Member{reg, seq};
      s.roster.push_back(node);
      AbortAll(
          step, 0,
          JobError(exit_code::kUsage, fits.error().what + " (fix: " + fits.error().hint + ")"));
      return;
    }
    Refuse(step, node, seq, fits.error());
    return;
  }
  cur = s.members.find(node);
  if (cur != s.members.end() && cur->second.away) {
    Log(step, NameOf(cur->second) + " is back" +
                  (cur->second.reg.incarnation == reg.incarnation
                       ? " (the same gculaunch)"
                       : " (a new gculaunch, pid " + std::to_string(reg.pid) + ", " +
                             (reg.addr.empty() ? std::string("address unknown") : reg.addr) + ")"));
  }
  s.members[node] = Member{reg, seq};
  s.roster.push_back(node);
  s.bye.erase(node);
  if (s.phase == CPhase::kGathering) {
    s.adopted = std::max(s.adopted, reg.last_epoch);
    MaybeStart(step, config);
  } else if (s.phase == CPhase::kRestarting) {
    MaybeRestart(step, config);
  } else if (s.phase == CPhase::kRunning && config.elastic()) {
    ElasticArrival(step, config, node);
  }
}

void OnBadJoin(CoordinatorStep& step, int node, int seq, const std::string& what) {
  Refuse(step, node, seq,
         Error{"node " + std::to_string(node) + " sent an unreadable " + what,
               "run the same gculaunch version on every node"});
}

void OnRendezvousTimeout(CoordinatorStep& step, const CoordinatorConfig& config) {
  if (step.state.phase != CPhase::kGathering) return;
  if (config.elastic() && Present(step.state) >= config.min_nodes) {
    // MIN is in but the last call (longer than --rdzv-timeout) has not passed: start now.
    step.state.last_call_passed = true;
    MaybeStart(step, config);
    return;
  }
  if (config.fixed_at_rendezvous()) {
    AbortAll(step, step.state.adopted + 1,
             JobError(exit_code::kRendezvousFailed,
                      std::to_string(Present(step.state)) + " of " + std::to_string(config.nnodes) +
                          " nodes joined within " + std::to_string(config.rdzv_timeout_s) +
                          " s (fix: start gculaunch on every node with the same "
                          "--rdzv-endpoint and --rdzv-id, or raise --rdzv-timeout)"));
    return;
  }
  if (config.elastic()) {
    AbortAll(step, step.state.adopted + 1,
             JobError(exit_code::kRendezvousFailed,
                      std::to_string(Present(step.state)) + " node(s) joined within " +
                          std::to_string(config.rdzv_timeout_s) + " s but the job needs " +
                          std::to_string(config.min_nodes) + " (--nnodes " +
                          std::to_string(config.min_nodes) + ":" + std::to_string(config.nnodes) +
                          ") (fix: start gculaunch on more nodes with the same rendezvous "
                          "endpoint, or raise --rdzv-timeout)"));
    return;
  }
  const std::vector<int> missing = Unjoined(step.state, config.nnodes);
  AbortAll(step, step.state.adopted + 1,
           JobError(exit_code::kRendezvousFailed,
                    NodesNamed(missing) + " of " + std::to_string(config.nnodes) +
                        " did not join within " + std::to_string(config.rdzv_timeout_s) +
                        " s (fix: start gculaunch on every node with the same "
                        "MASTER_ADDR and MASTER_PORT, or raise --rdzv-timeout)"));
}

std::string AwayText(const CoordinatorState& s, const CoordinatorConfig& config) {
  std::string text;
  if (config.elastic()) {
    if (s.phase != CPhase::kRestarting || Present(s) >= config.min_nodes) return text;
    for (const auto& [node, m] : s.members) {
      if (m.away) text += "; " + Describe(m.gone);
    }
    return "waiting for nodes to join: " + std::to_string(Present(s)) + " present, the job needs " +
           std::to_string(config.min_nodes) + ", at most " + std::to_string(config.rdzv_timeout_s) +
           " s after the loss (--rdzv-timeout)" + text;
  }
  for (const auto& [node, m] : s.members) {
    if (!m.away) continue;
    if (!text.empty()) text += "; ";
    text += "waiting for " + NameOf(m) + " to come back (" + Describe(m.gone) + "), at most " +
            std::to_string(config.rdzv_timeout_s) + " s after the loss (--rdzv-timeout)";
  }
  return text;
}

// Every 10 s: what the current phase still waits for, if anything.
void OnMissingTick(CoordinatorStep& step, const CoordinatorConfig& config) {
  const CoordinatorState& s = step.state;
  std::vector<int> missing;
  std::string text;
  if (s.phase == CPhase::kGathering && config.fixed_at_rendezvous()) {
    missing.push_back(-1);
    const int more = config.nnodes - Present(s);
    text = "waiting for " + std::to_string(more) + " more node" + (more == 1 ? "" : "s") +
           " to join (" + std::to_string(Present(s)) + " of " + std::to_string(config.nnodes) +
           " present, node ranks assigned at rendezvous" +
           (config.host_why.empty() ? "" : "; this node hosts the store: " + config.host_why) + ")";
  } else if (s.phase == CPhase::kGathering && config.elastic()) {
    missing.push_back(-1);
    text = "waiting for nodes to join (" + std::to_string(Present(s)) + " present, the job needs " +
           std::to_string(config.min_nodes) + " to " + std::to_string(config.nnodes) + ")";
  } else if (s.phase == CPhase::kGathering) {
    missing = Unjoined(s, config.nnodes);
    text = "waiting for " + NodesNamed(missing) + " to join (" + std::to_string(s.members.size()) +
           " of " + std::to_string(config.nnodes) + " present)";
  } else if (s.phase == CPhase::kRestarting || s.phase == CPhase::kRunning) {
    text = AwayText(s, config);
    for (const auto& [node, m] : s.members) {
      if (!m.away && m.admitted && s.reaped.count(node) == 0 && s.phase == CPhase::kRestarting) {
        missing.push_back(node);
      }
    }
    if (!missing.empty()) {
      text += std::string(text.empty() ? "" : "; ") + "waiting for " + NodesNamed(missing) +
              " to stop their ranks before restart " + std::to_string(s.epoch + 1);
    }
    if (!text.empty()) missing.push_back(-1);
  } else if (s.phase == CPhase::kFinishing) {
    for (const auto& [node, m] : s.members) {
      if (s.bye.count(node) == 0 && !m.away) missing.push_back(node);
    }
    text = "waiting for " + NodesNamed(missing) + " to finish";
  }
  if (missing.empty()) return;
  CoordinatorAction log = CAct(CK::kLogMissing, s.epoch);
  log.text = std::move(text);
  step.actions.push_back(std::move(log));
}

void OnDone(CoordinatorStep& step, int epoch, int node) {
  CoordinatorState& s = step.state;
  if (s.phase != CPhase::kRunning || epoch != s.epoch) return;
  if (!InPlan(s, node)) return;
  s.done.insert(node);
  if (s.done.size() == s.order.size() && !s.marker && !s.marker_published) {
    CoordinatorAction publish = CAct(CK::kPublishMarker, s.epoch);
    publish.marker.kind = StopMarker::Kind::kSuccess;
    publish.marker.epoch = s.epoch;
    publish.marker.restarts = s.restarts;
    publish.marker.restartable = false;
    publish.marker.what = "every node's ranks exited 0";
    step.actions.push_back(std::move(publish));
    s.marker_published = true;
  }
}

void OnReaped(CoordinatorStep& step, const CoordinatorConfig& config, int epoch, int node,
              const AttemptReport& report) {
  CoordinatorState& s = step.state;
  if (epoch != s.epoch) return;
  if (s.phase != CPhase::kRunning && s.phase != CPhase::kRestarting) return;
  s.reaped.insert(node);
  s.reports[node] = report;
  if (s.phase == CPhase::kRestarting) MaybeRestart(step, config);
}

void OnMarker(CoordinatorStep& step, const CoordinatorConfig& config, const StopMarker& marker,
              double ran_s) {
  CoordinatorState& s = step.state;
  if (s.phase != CPhase::kRunning || marker.epoch != s.epoch || s.marker) return;
  s.marker = marker;
  s.ran_s = ran_s;
  if (marker.kind == StopMarker::Kind::kNodeLeft && marker.node > 0) {
    // It leaves (its bye follows); the job waits for it like for a lost node.
    if (auto m = s.members.find(marker.node); m != s.members.end()) {
      m->second.away = true;
      m->second.gone = marker;
      s.roster.push_back(marker.node);
    }
  }
  if (!Restartable(marker, config.max_restarts)) {
    s.phase = CPhase::kFinishing;
    MaybeFinish(step);
    return;
  }
  if (marker.kind == StopMarker::Kind::kRankFailed) {
    for (const auto& [node, m] : s.members) {
      if (!m.away) continue;
      Log(step, Describe(marker) + " before " + NameOf(m) +
                    " was known lost: taken as a consequence, one restart for both");
      break;
    }
  }
  s.phase = CPhase::kRestarting;
  if (marker.kind != StopMarker::Kind::kNodeJoined) {  // a restart that costs one
    const BackoffStep wait = NextBackoff(s.backoff, config.backoff, ran_s);
    s.backoff = wait.state;
    s.backoff_s = wait.delay_s;
  }
  MaybeRestart(step, config);
}

bool CurrentJoin(const CoordinatorState& s, int node, int seq) {
  auto m = s.members.find(node);
  return m != s.members.end() && m->second.seq == seq;
}

void OnBye(CoordinatorStep& step, const CoordinatorConfig& config, int node, int seq,
           int exit_code) {
  CoordinatorState& s = step.state;
  if (!CurrentJoin(s, node, seq) || s.bye.count(node) != 0) return;
  s.bye.insert(node);
  if (s.phase == CPhase::kFinishing) {
    MaybeFinish(step);
    return;
  }
  if (node == 0) {
    // Node 0 itself leaves while the job goes on: the store stops, and the other nodes wait
    // for a new node 0 at MASTER_ADDR:MASTER_PORT.
    s.phase = CPhase::kDone;
    step.actions.push_back(CAct(CK::kFinish, s.epoch));
    return;
  }
  StopMarker m;
  m.kind = StopMarker::Kind::kNodeLeft;
  m.exit_code = exit_code;
  m.what = "its gculaunch exited with code " + std::to_string(exit_code);
  NodeGone(step, config, node, std::move(m));
}

void OnNodeSilent(CoordinatorStep& step, const CoordinatorConfig& config, int node, int seq,
                  const std::string& what) {
  const CoordinatorState& s = step.state;
  if (!CurrentJoin(s, node, seq) || s.bye.count(node) != 0) return;
  StopMarker m;
  m.kind = StopMarker::Kind::kNodeLost;
  m.what = what;
  NodeGone(step, config, node, std::move(m));
}

void OnRejoinTimeout(CoordinatorStep& step, const CoordinatorConfig& config, int node) {
  CoordinatorState& s = step.state;
  auto m = s.members.find(node);
  if (m == s.members.end() || !m->second.away) return;
  if (s.phase != CPhase::kRunning && s.phase != CPhase::kRestarting) return;
  StopMarker gone = m->second.gone;
  if (config.elastic()) {
    // The job re-forms without it when MIN nodes remain; else it waited for joins this long.
    if (s.phase != CPhase::kRestarting || Present(s) >= config.min_nodes) return;
    const std::string nnodes =
        config.min_nodes == config.nnodes
            ? std::to_string(config.nnodes)
            : std::to_string(config.min_nodes) + ":" + std::to_string(config.nnodes);
    gone.what += "; " + std::to_string(Present(s)) + " node(s) remain of the " +
                 std::to_string(config.min_nodes) + " the job needs (--nnodes " + nnodes +
                 ") and no node joined within " + std::to_string(config.rdzv_timeout_s) +
                 " s (--rdzv-timeout)";
    AbortAll(step, s.epoch + 1, std::move(gone));
    return;
  }
  gone.what += "; it did not come back within " + std::to_string(config.rdzv_timeout_s) +
               " s (--rdzv-timeout)";
  m->second.gone = gone;
  AbortAll(step, s.epoch + 1, std::move(gone));
}

}  // namespace

CoordinatorStep Step(CoordinatorState state, const CoordinatorConfig& config,
                     const CoordinatorEvent& event) {
  CoordinatorStep step{std::move(state), {}};
  if (step.state.phase == CPhase::kDone) return step;
  switch (event.kind) {
    case CoordinatorEvent::Kind::kJoin:
      OnJoin(step, config, event.seq, event.reg);
      break;
    case CoordinatorEvent::Kind::kBadJoin:
      OnBadJoin(step, event.node, event.seq, event.what);
      break;
    case CoordinatorEvent::Kind::kRendezvousTimeout:
      OnRendezvousTimeout(step, config);
      break;
    case CoordinatorEvent::Kind::kMissingTick:
      OnMissingTick(step, config);
      break;
    case CoordinatorEvent::Kind::kDone:
      OnDone(step, event.epoch, event.node);
      break;
    case CoordinatorEvent::Kind::kReaped:
      OnReaped(step, config, event.epoch, event.node, event.report);
      break;
    case CoordinatorEvent::Kind::kMarker:
      OnMarker(step, config, event.marker, event.ran_s);
      break;
    case CoordinatorEvent::Kind::kBye:
      OnBye(step, config, event.node, event.seq, event.exit_code);
      break;
    case CoordinatorEvent::Kind::kNodeSilent:
      OnNodeSilent(step, config, event.node, event.seq, event.what);
      break;
    case CoordinatorEvent::Kind::kRejoinTimeout:
      OnRejoinTimeout(step, config, event.node);
      break;
    case CoordinatorEvent::Kind::kBackoffOver:
      if (step.state.phase == CPhase::kRestarting && step.state.backoff_armed &&
          !step.state.backoff_over && event.epoch == step.state.epoch + 1) {
        step.state.backoff_over = true;
        MaybeRestart(step, config);
      }
      break;
    case CoordinatorEvent::Kind::kLastCall:
      if (step.state.phase == CPhase::kGathering && config.elastic()) {
        step.state.last_call_passed = true;
        MaybeStart(step, config);
      }
      break;
  }
  LowerRestartReady(step.state);
  return step;
}

std::string ActionName(const CoordinatorAction& a) {
  const std::string e = "(" + std::to_string(a.epoch) + ")";
  switch (a.kind) {
    case CK::kAdmit:
      return std::string(a.plan.abort ? "Refuse" : "Admit") + "(" + std::to_string(a.node) + "/" +
             std::to_string(a.seq) + ")" + e;
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
    case CK::kLog:
      return "Log[" + a.text + "]";
    case CK::kArmLastCall:
      return "ArmLastCall";
    case CK::kArmBackoff: {
      char text[48];
      std::snprintf(text, sizeof text, "ArmBackoff(%d, %g s)", a.epoch, a.delay_s);
      return text;
    }
    case CK::kFinish:
      return "Finish";
  }
  return "?";
}

}  // namespace gculaunch::job
