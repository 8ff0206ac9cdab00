#include "launcher/ops/status_model.h"

#include <time.h>

#include <algorithm>

namespace gculaunch {

namespace {

double RealNow() {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

template <typename T>
T Field(const nlohmann::json& j, const char* key, T fallback) {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    return fallback;  // a field of another type: the launch event is ours, so never
  }
}

}  // namespace

void DurationStats::Add(double seconds) {
  if (seconds < 0) return;
  ++count;
  sum_s += seconds;
  last_s = seconds;
}

int JobSnapshot::RanksRunning() const {
  return static_cast<int>(
      std::count_if(ranks.begin(), ranks.end(), [](const RankStatus& r) { return r.running(); }));
}

int JobSnapshot::NodesPresent() const {
  return static_cast<int>(
      std::count_if(nodes.begin(), nodes.end(), [](const auto& n) { return n.second.present; }));
}

int JobSnapshot::NodesLost() const { return static_cast<int>(nodes.size()) - NodesPresent(); }

JobStatus::JobStatus(Clock now) : now_(now ? std::move(now) : Clock(RealNow)) {}

void JobStatus::On(const JobEvent& e) {
  using K = JobEvent::Kind;
  switch (e.kind) {
    case K::kLaunch:
      s_.run_id = Field<std::string>(e.launch, "run_id", "");
      s_.node_rank = Field<int>(e.launch, "node_rank", 0);
      s_.nnodes = Field<int>(e.launch, "nnodes", 1);
      s_.nproc_per_node = Field<int>(e.launch, "nproc_per_node", 0);
      s_.max_restarts = Field<int>(e.launch, "max_restarts", 0);
      s_.layout = Field<std::string>(e.launch, "layout", "");
      s_.host = Field<std::string>(e.launch, "host", "");
      s_.launcher_pid = Field<int>(e.launch, "pid", -1);
      s_.launch_time = now_();
      break;
    case K::kRendezvous:
      s_.rendezvous.Add(e.duration_s);
      break;
    case K::kRankStart:
    case K::kRankExit:
      OnRank(e);
      break;
    case K::kRestart:
      s_.restarts = e.restarts;
      s_.restart_durations.Add(e.duration_s);
      s_.restart_backoff_s = 0;  // the wait (if any) is over
      s_.next_restart_time = 0;
      break;
    case K::kBackoff:
      s_.restart_backoff_s = e.backoff_s;
      s_.next_restart_time = now_() + e.backoff_s;
      break;
    case K::kNodeJoin:
    case K::kNodeLoss:
    case K::kNodeReturn:
    case K::kHeartbeat:
      OnNode(e);
      break;
    case K::kHang:
      break;  // the stop or restart that follows tells the status
    case K::kStop:
      s_.exit_code = e.exit_code;
      s_.stop_reason = e.reason;
      s_.outcome = e.outcome;
      break;
    case K::kUnhealthy:
      s_.unhealthy_cards = e.cards;
      s_.unhealthy = e.reason;
      break;
    case K::kDeviceMemoryWait:
      ++s_.device_memory_waits;
      if (!e.freed) ++s_.device_memory_held;
      break;
  }
}

void JobStatus::OnRank(const JobEvent& e) {
  if (e.kind == JobEvent::Kind::kRankStart) {
    if (e.epoch != s_.epoch) s_.ranks.clear();  // a new epoch: the old ranks are gone
    s_.epoch = e.epoch;
    RankStatus r;
    r.epoch = e.epoch;
    r.rank = e.rank;
    r.local_rank = e.local_rank;
    r.pid = e.pid;
    r.start_time = now_();
    s_.ranks.push_back(r);
    return;
  }
  if (e.exit) ++s_.exits_by_code[e.exit->ShellCode()];
  for (RankStatus& r : s_.ranks) {
    if (r.epoch == e.epoch && r.local_rank == e.local_rank) {
      r.exit = e.exit;
      r.exit_time = now_();
    }
  }
}

void JobStatus::OnNode(const JobEvent& e) {
  using K = JobEvent::Kind;
  NodeStatus& n = s_.nodes[e.node];
  n.node = e.node;
  switch (e.kind) {
    case K::kNodeJoin:
      n.host = e.host;
      n.addr = e.addr;
      n.present = true;
      n.joined_time = now_();
      break;
    case K::kNodeLoss:
      n.present = false;
      n.lost_reason = e.reason;
      ++n.losses;
      ++s_.node_losses;
      break;
    case K::kNodeReturn:
      if (!e.addr.empty()) n.addr = e.addr;
      n.present = true;
      n.joined_time = now_();
      break;
    default:
      n.last_heartbeat = now_();
      break;
  }
}

}  // namespace gculaunch
