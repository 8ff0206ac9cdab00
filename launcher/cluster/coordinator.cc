#include "launcher/cluster/coordinator.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "base/duration.h"
#include "base/text.h"
#include "launcher/cluster/member_events.h"
#include "launcher/sys/free_port.h"

namespace gculaunch {

using job::CoordinatorAction;
using job::CoordinatorEvent;
using Phase = job::CoordinatorState::Phase;
using Clock = std::chrono::steady_clock;
using Ms = std::chrono::duration<double, std::milli>;

Coordinator::Coordinator(boost::asio::io_context& io, CoordinatorBoard& board,
                         CoordinatorSettings settings, spdlog::logger& log)
    : board_(board),
      settings_(std::move(settings)),
      log_(log),
      missing_timer_(io),
      deadline_timer_(io),
      heartbeat_timer_(io),
      last_call_timer_(io),
      backoff_timer_(io),
      lag_(settings_.heartbeat_check) {}

Coordinator::~Coordinator() { board_.OnHangUp(nullptr); }

std::vector<int> Coordinator::OtherMembers() const {
  std::vector<int> nodes;
  if (!state_.order.empty()) {
    for (const int node : state_.order) {
      if (node != 0) nodes.push_back(node);
    }
  } else if (settings_.config.elastic()) {
    for (const auto& [node, member] : state_.members) {
      if (node != 0) nodes.push_back(node);
    }
  } else {
    for (int node = 1; node < settings_.config.nnodes; ++node) nodes.push_back(node);
  }
  return nodes;
}

void Coordinator::Start() {
  started_ = Clock::now();
  board_.OnHangUp(lifetime_.Wrap([this](int node, int seq, const std::string& why) {
    if (finished() || board_.SaidBye(node, seq)) return;  // it said bye first
    Dispatch(CoordinatorEvent::NodeSilent(node, seq, why));
  }));
  board_.PublishJobInfo(job::Encode(settings_.config.node0));
  if (settings_.config.elastic()) {
    WatchJoins(0, 1);  // the store host: this node
    WatchIds(1);
  } else {
    for (int k = 0; k < settings_.config.nnodes; ++k) WatchJoins(k, 1);
  }
  deadline_timer_.expires_after(settings_.rdzv_timeout);
  deadline_timer_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec) {
    if (!ec) Dispatch(CoordinatorEvent::RendezvousTimeout());
  }));
  ArmMissing();
  ArmHeartbeatCheck();
}

// Join requests of `node`, one after the other, from number `seq` on.
void Coordinator::WatchJoins(int node, int seq) {
  next_join_[node] = seq;
  board_.WatchJoin(node, seq, lifetime_.Wrap([this, node, seq](Result<std::string> text) {
    if (!text.ok() || next_join_[node] != seq || finished()) return;
    WatchJoins(node, seq + 1);
    auto reg = job::DecodeRegistration(*text);
    if (!reg.ok()) {
      Dispatch(CoordinatorEvent::BadJoin(node, seq, reg.error().what));
    } else if (reg->node_rank != node) {
      Dispatch(CoordinatorEvent::BadJoin(
          node, seq, "registration naming node " + std::to_string(reg->node_rank)));
    } else {
      Dispatch(CoordinatorEvent::Join(seq, std::move(*reg)));
    }
  }));
}

// Elastic: every join request of a node other than the store host has a fresh node id, drawn
// in order (job/nodeid): the requests are watched one id after the other, a global queue.
void Coordinator::WatchIds(int id) {
  next_id_ = id;
  board_.WatchJoin(id, 1, lifetime_.Wrap([this, id](Result<std::string> text) {
    if (!text.ok() || next_id_ != id || finished()) return;
    WatchIds(id + 1);
    auto reg = job::DecodeRegistration(*text);
    if (!reg.ok()) {
      Dispatch(CoordinatorEvent::BadJoin(id, 1, reg.error().what));
    } else if (reg->node_rank != id) {
      Dispatch(CoordinatorEvent::BadJoin(
          id, 1, "registration naming node " + std::to_string(reg->node_rank)));
    } else {
      Dispatch(CoordinatorEvent::Join(1, std::move(*reg)));
    }
  }));
}

// A node that numbered a join request and died before writing it leaves a gap: the next
// request must not wait behind it.  A tick looks at `join_gap_slice` nodes, round robin from
// where the last one stopped: a look costs ~1 us (store reads), and looking at every node
// four times a second was 3% of node 0's CPU at 16k nodes, whatever the job did.  A gap is
// rare (the node died between its two writes) and is found within ceil(N / slice) ticks: one
// tick up to 1024 nodes, 4 s at 16k.
void Coordinator::CheckJoinGaps() {
  if (settings_.config.elastic() && board_.IdsTaken() > next_id_ &&
      !board_.JoinExists(next_id_, 1) && board_.JoinExists(next_id_ + 1, 1)) {
    WatchIds(next_id_ + 1);
    return;
  }
  const std::size_t slice =
      std::min(std::max<std::size_t>(settings_.join_gap_slice, 1), next_join_.size());
  auto it = next_join_.lower_bound(gap_cursor_);
  for (std::size_t looked = 0; looked < slice; ++looked, ++it) {
    if (it == next_join_.end()) it = next_join_.begin();
    const auto [node, seq] = *it;
    if (board_.JoinsNumbered(node) > seq && !board_.JoinExists(node, seq) &&
        board_.JoinExists(node, seq + 1)) {
      gap_cursor_ = node;
      WatchJoins(node, seq + 1);
      return;  // next_join_ changed: check again at the next tick
    }
  }
  gap_cursor_ = it == next_join_.end() ? 0 : it->first;
}

void Coordinator::ArmMissing() {
  missing_timer_.expires_after(settings_.missing_period);
  missing_timer_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec) {
    if (ec || finished()) return;
    Dispatch(CoordinatorEvent::MissingTick());
    ArmMissing();
  }));
}

void Coordinator::ArmHeartbeatCheck() {
  heartbeat_timer_.expires_after(settings_.heartbeat_check);
  heartbeat_timer_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec) {
    if (ec || finished()) return;
    CheckHeartbeats();
    if (!finished()) CheckJoinGaps();
    ArmHeartbeatCheck();
  }));
}

// A node is heard when anything arrives on its control connection (the board counts it: a
// heartbeat, a report, a progress line); the value changing is all that matters.  Silence is
// judged in this process's own running time (liveness.h): a tick that comes late means
// node 0 itself was stopped or starved, and the nodes' messages may still wait unread.
void Coordinator::CheckHeartbeats() {
  const auto now = Clock::now();
  if (const auto late = lag_.Tick(now); late >= std::chrono::seconds(2)) ReportLate(now, late);
  const auto lag = lag_.total();
  std::vector<CoordinatorEvent> events;
  for (auto& [node, beat] : beats_) {
    if (node == 0 || state_.bye.count(node) != 0) continue;
    std::string value = board_.Heartbeat(node, beat.seq);
    if (value != beat.value) {
      settings_.events->On(JobEvent::Heartbeat(node));
      beat.value = std::move(value);
      beat.silence.Heard(now, lag);
      continue;
    }
    if (beat.silence.Lost(now, lag, settings_.silence)) {
      const std::string why = job::SilenceText(
          beat.silence.Silent(now, lag), beat.silence.Bound(settings_.silence), settings_.silence);
      events.push_back(CoordinatorEvent::NodeSilent(node, beat.seq, why));
    }
  }
  for (const auto& [node, since] : away_) {
    if (now - since >= settings_.rdzv_timeout) {
      events.push_back(CoordinatorEvent::RejoinTimeout(node));
    }
  }
  for (const CoordinatorEvent& event : events) {
    if (finished()) return;
    Dispatch(event);
  }
}

// Node 0 itself did not run for a while: said (at most every 30 s), since the nodes may see
// it as a silence of their own.
void Coordinator::ReportLate(Clock::time_point now, Clock::duration late) {
  if (late_reported_ != Clock::time_point{} && now - late_reported_ < std::chrono::seconds(30)) {
    return;
  }
  late_reported_ = now;
  log_.warn(
      "this gculaunch did not run for {} (stopped, or starved of CPU): the nodes' silence of "
      "that time is not held against them",
      Seconds(late));
}

void Coordinator::Dispatch(const CoordinatorEvent& event) {
  // The state moves through the step, and the members are walked only when the step changed
  // them: a copy or a walk per event would cost a job of N nodes O(N^2) while it gathers, and
  // again in every restart (bench.scale).
  job::CoordinatorStep step = job::Step(std::move(state_), settings_.config, event);
  state_ = std::move(step.state);
  std::vector<int> changed = std::move(state_.roster);
  state_.roster.clear();
  std::sort(changed.begin(), changed.end());
  changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
  ReportMembers(changed, state_, members_seen_, *settings_.events);
  for (const CoordinatorAction& action : step.actions) Execute(action);
  Track(changed);
}

// Heartbeats, byes and deadlines follow the members the policy keeps: those of `changed`, the
// members the last step added, removed, replaced or lost.
void Coordinator::Track(const std::vector<int>& changed) {
  const auto now = Clock::now();
  if (auto node0 = state_.members.find(0); node0 != state_.members.end() && !info_complete_) {
    board_.PublishJobInfo(job::Encode(node0->second.reg));  // now with node 0's address
    info_complete_ = true;
  }
  for (const int node : changed) {
    auto it = state_.members.find(node);
    if (it == state_.members.end()) {
      beats_.erase(node);
      away_.erase(node);
      continue;
    }
    const job::Member& m = it->second;
    if (m.away) {
      beats_.erase(node);
      away_.try_emplace(node, now);
      continue;
    }
    away_.erase(node);
    auto beat = beats_.find(node);
    if (beat != beats_.end() && beat->second.seq == m.seq) continue;
    beats_[node] = Beat{m.seq, "", job::PeerSilence(now, lag_.total())};
    const int seq = m.seq;
    board_.WatchBye(node, seq, lifetime_.Wrap([this, node, seq](int code) {
      Dispatch(CoordinatorEvent::Bye(node, seq, code));
    }));
  }
}

void Coordinator::WatchEpoch(int epoch) {
  board_.WatchMarker(epoch, lifetime_.Wrap([this, epoch](Result<std::string> text) {
    if (!text.ok()) return;
    auto marker = job::DecodeMarker(*text);
    if (!marker.ok()) {
      log_.error("unreadable stop marker for epoch {}: {}", epoch, marker.error().what);
      return;
    }
    stopped_ = Clock::now();
    const double ran_s = epoch_began_ == Clock::time_point{}
                             ? 0
                             : std::chrono::duration<double>(stopped_ - epoch_began_).count();
    Dispatch(CoordinatorEvent::Marker(std::move(*marker), ran_s));
  }));
  for (int k : state_.order) {
    board_.WatchDone(
        epoch, k, lifetime_.Wrap([this, epoch, k] { Dispatch(CoordinatorEvent::Done(epoch, k)); }));
    board_.WatchReaped(epoch, k, lifetime_.Wrap([this, epoch, k](const Result<std::string>& text) {
      // A report that does not decode counts as empty: a failure nobody can compare never
      // stops the job.
      auto report = text.ok() ? job::DecodeReport(*text) : Result<AttemptReport>(text.error());
      Dispatch(CoordinatorEvent::Reaped(epoch, k, report.ok() ? *report : AttemptReport{}));
    }));
  }
}

void Coordinator::PublishPlan(job::JobPlan plan) {
  if (!plan.abort) {  // an abort is logged by every node's agent
    if (settings_.ranks_port > 0) {
      plan.ranks_port = settings_.ranks_port;
    } else if (settings_.ranks_port < 0) {
      // --no-agent-store: rank 0 (on this node) hosts the ranks' store; a port free now,
      // fresh per epoch so that the previous attempt's sockets cannot be in the way.
      auto port = sys::PickFreePort();
      if (!port.ok()) {
        log_.error("no free port for rank 0's store: {}", port.error().what);
      } else {
        plan.ranks_port = *port;
      }
    }
    if (epoch_began_ == Clock::time_point{}) {  // the first plan
      // One line, also for thousands of nodes: the first 32 by name, then a count.
      constexpr std::size_t kNamed = 32;
      std::string nodes;
      for (std::size_t i = 0; i < plan.nodes.size() && i < kNamed; ++i) {
        const job::PlanNode& n = plan.nodes[i];
        if (!nodes.empty()) nodes += ", ";
        nodes += job::NodeName(n.node_rank, n.host, n.addr) + " x" + std::to_string(n.nproc);
      }
      if (plan.nodes.size() > kNamed) {
        nodes += " and " + std::to_string(plan.nodes.size() - kNamed) + " more";
      }
      log_.info("rendezvous complete in {:.0f} ms: {}", Ms(Clock::now() - started_).count(), nodes);
    }
  }
  if (plan.abort) {
    // Small, and for every node that waits: the whole plan's key (older nodes) and each
    // member's own.
    const std::string text = job::Encode(plan);
    board_.PublishPlan(plan.epoch, text);
    for (const auto& [node, m] : state_.members) {
      if (m.reg.node_plans) board_.PublishNodePlan(plan.epoch, node, text);
    }
    return;
  }
  epoch_began_ = Clock::now();
  const int epoch = plan.epoch;
  // Admissions repeat the current epoch's plan only, and no node reads an older epoch's own
  // plan once every node reaped it: the older ones go, here and in the store (a job of many
  // nodes and restarts would otherwise keep every epoch's).
  for (auto old = plans_.begin(); old != plans_.lower_bound(epoch); ++old) {
    for (const auto& entry : old->second.entry) board_.ForgetNodePlan(old->first, entry.first);
  }
  plans_.erase(plans_.begin(), plans_.lower_bound(epoch));
  Published& published = plans_[epoch] = Publish(std::move(plan));
  const job::JobPlan& whole = published.plan;
  // Each node reads its own plan, so that the bytes leaving node 0 per epoch grow with the
  // nodes, not with their square (bench.scale); the whole plan is written only while a node
  // of an older gculaunch is in it.
  bool older = false;
  for (const job::PlanNode& n : whole.nodes) {
    if (ReadsOwnPlan(n.id)) {
      board_.PublishNodePlan(epoch, n.id, PlanTextFor(published, n.id));
    } else {
      older = true;
    }
  }
  if (older) board_.PublishPlan(epoch, WholeText(published));
}

bool Coordinator::ReadsOwnPlan(int node) const {
  auto member = state_.members.find(node);
  return member != state_.members.end() && member->second.reg.node_plans;
}

const std::string& Coordinator::WholeText(Published& published) {
  if (published.whole.empty()) published.whole = job::Encode(published.plan);
  return published.whole;
}

Coordinator::Published Coordinator::Publish(job::JobPlan plan) {
  Published published;
  for (std::size_t i = 0; i < plan.nodes.size(); ++i) published.entry[plan.nodes[i].id] = i;
  published.plan = std::move(plan);
  return published;
}

std::string Coordinator::PlanTextFor(Published& published, int node) {
  auto entry = published.entry.find(node);
  if (entry != published.entry.end() && ReadsOwnPlan(node)) {
    return job::Encode(job::PlanFor(published.plan, published.plan.nodes[entry->second]));
  }
  return WholeText(published);
}

// A crash loop backs off: node 0 decides the wait for every node (they wait for the plan).
void Coordinator::ArmBackoff(const CoordinatorAction& action) {
  const std::string wait = Seconds(std::chrono::duration<double>(action.delay_s), -1);
  log_.warn(
      "restart {} of {}: every node waits {} before it restarts its ranks (quick failures back "
      "off; --restart-backoff)",
      action.epoch, settings_.config.max_restarts, wait);
  settings_.events->On(JobEvent::Backoff(
      action.epoch, action.delay_s,
      action.marker.epoch == action.epoch - 1 ? job::Describe(action.marker) : std::string()));
  backoff_timer_.expires_after(SecondsToMillis(action.delay_s));
  backoff_timer_.async_wait(
      lifetime_.Wrap([this, epoch = action.epoch](const boost::system::error_code& ec) {
        if (!ec && !finished()) Dispatch(CoordinatorEvent::BackoffOver(epoch));
      }));
}

void Coordinator::Execute(const CoordinatorAction& action) {
  using K = CoordinatorAction::Kind;
  switch (action.kind) {
    case K::kAdmit: {
      if (action.plan.abort) {
        board_.Admit(action.node, action.seq, job::Encode(action.plan));
        break;
      }
      auto plan = plans_.find(action.plan.epoch);
      if (plan == plans_.end()) {
        Published once = Publish(action.plan);
        board_.Admit(action.node, action.seq, PlanTextFor(once, action.node));
      } else {
        board_.Admit(action.node, action.seq, PlanTextFor(plan->second, action.node));
      }
      break;
    }
    case K::kPublishPlan:
      PublishPlan(action.plan);
      break;
    case K::kBeginAttempt:
      if (stopped_ != Clock::time_point{}) {
        log_.info(
            "every node reaped its ranks of epoch {} ({:.0f} ms after the stop); restart {} "
            "begins",
            action.epoch - 1, Ms(Clock::now() - stopped_).count(), action.epoch);
      }
      board_.BeginAttempt(action.epoch);
      break;
    case K::kPublishMarker:
      board_.PublishMarker(action.epoch, job::Encode(action.marker));
      break;
    case K::kWatchEpoch:
      WatchEpoch(action.epoch);
      break;
    case K::kLogMissing:
      log_.info("{}", action.text);
      board_.SetMissing(action.text);
      break;
    case K::kLog:
      log_.warn("{}", action.text);
      break;
    case K::kArmLastCall:
      last_call_timer_.expires_after(settings_.last_call);
      last_call_timer_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec) {
        if (!ec && !finished()) Dispatch(CoordinatorEvent::LastCall());
      }));
      break;
    case K::kArmBackoff:
      ArmBackoff(action);
      break;
    case K::kFinish:
      backoff_timer_.cancel();
      last_call_timer_.cancel();
      missing_timer_.cancel();
      deadline_timer_.cancel();
      heartbeat_timer_.cancel();
      break;
  }
}

}  // namespace gculaunch
