#include "launcher/run/job_events.h"

namespace gculaunch {

namespace {

// The listener of whoever has none, so that no emitter tests a pointer before each event.
class Ignore final : public JobEvents {
 public:
  void On(const JobEvent&) override {}
};

}  // namespace

JobEvent JobEvent::Launch(nlohmann::json fields) {
  JobEvent e;
  e.kind = Kind::kLaunch;
  e.launch = std::move(fields);
  return e;
}

JobEvent JobEvent::Rendezvous(int epoch, int nodes, int world_size, double duration_s) {
  JobEvent e;
  e.kind = Kind::kRendezvous;
  e.epoch = epoch;
  e.nodes = nodes;
  e.world_size = world_size;
  e.duration_s = duration_s;
  return e;
}

JobEvent JobEvent::RankStart(int epoch, int rank, int local_rank, pid_t pid) {
  JobEvent e;
  e.kind = Kind::kRankStart;
  e.epoch = epoch;
  e.rank = rank;
  e.local_rank = local_rank;
  e.pid = pid;
  return e;
}

JobEvent JobEvent::RankExit(int epoch, int rank, int local_rank, pid_t pid, WorkerExit exit) {
  // The same fields as the rank's start: a reader pairs the two by epoch, rank and pid.
  JobEvent e = RankStart(epoch, rank, local_rank, pid);
  e.kind = Kind::kRankExit;
  e.exit = exit;
  return e;
}

JobEvent JobEvent::Restart(int restarts, int max_restarts, std::string reason,
                           double since_stop_s) {
  JobEvent e;
  e.kind = Kind::kRestart;
  e.epoch = restarts;  // restart n starts epoch n: the restart count is the epoch's number
  e.restarts = restarts;
  e.max_restarts = max_restarts;
  e.reason = std::move(reason);
  e.duration_s = since_stop_s;
  return e;
}

JobEvent JobEvent::Backoff(int restarts, double backoff_s, std::string reason) {
  JobEvent e;
  e.kind = Kind::kBackoff;
  e.epoch = restarts;  // the epoch that waits for the back-off, as in Restart
  e.restarts = restarts;
  e.backoff_s = backoff_s;
  e.reason = std::move(reason);
  return e;
}

JobEvent JobEvent::NodeJoin(int node, std::string host, std::string addr) {
  JobEvent e;
  e.kind = Kind::kNodeJoin;
  e.node = node;
  e.host = std::move(host);
  e.addr = std::move(addr);
  return e;
}

JobEvent JobEvent::NodeLoss(int node, std::string reason) {
  JobEvent e;
  e.kind = Kind::kNodeLoss;
  e.node = node;
  e.reason = std::move(reason);
  return e;
}

JobEvent JobEvent::NodeReturn(int node, std::string addr) {
  JobEvent e;
  e.kind = Kind::kNodeReturn;
  e.node = node;
  e.addr = std::move(addr);
  return e;
}

JobEvent JobEvent::Heartbeat(int node) {
  JobEvent e;
  e.kind = Kind::kHeartbeat;
  e.node = node;
  return e;
}

JobEvent JobEvent::Hang(int epoch, double timeout_s, double silent_s, std::string action,
                        std::vector<int> odd_ranks, std::string reason) {
  JobEvent e;
  e.kind = Kind::kHang;
  e.epoch = epoch;
  e.timeout_s = timeout_s;
  e.silent_s = silent_s;
  e.action = std::move(action);
  e.odd_ranks = std::move(odd_ranks);
  e.reason = std::move(reason);
  return e;
}

JobEvent JobEvent::Stop(int exit_code, Outcome outcome, int rank_exit_code) {
  JobEvent e;
  e.kind = Kind::kStop;
  e.exit_code = exit_code;
  e.rank_exit_code = rank_exit_code;
  e.outcome = outcome;
  e.reason = std::string(OutcomeName(outcome));
  return e;
}

JobEvent JobEvent::Unhealthy(int epoch, std::vector<std::string> cards, std::string reason) {
  JobEvent e;
  e.kind = Kind::kUnhealthy;
  e.epoch = epoch;
  e.cards = std::move(cards);
  e.reason = std::move(reason);
  return e;
}

JobEvent JobEvent::DeviceMemoryWait(int epoch, double waited_s, bool freed,
                                    std::vector<std::string> cards, std::string held) {
  JobEvent e;
  e.kind = Kind::kDeviceMemoryWait;
  e.epoch = epoch;
  e.duration_s = waited_s;
  e.freed = freed;
  e.cards = std::move(cards);
  e.reason = std::move(held);
  return e;
}

const char* EventName(JobEvent::Kind kind) {
  using K = JobEvent::Kind;
  switch (kind) {
    case K::kLaunch:
      return "launch";
    case K::kRendezvous:
      return "rendezvous_complete";  // torchelastic's event name, which dashboards know
    case K::kRankStart:
      return "rank_start";
    case K::kRankExit:
      return "rank_exit";
    case K::kRestart:
      return "restart";
    case K::kBackoff:
      return "restart_backoff";
    case K::kNodeJoin:
      return "node_join";
    case K::kNodeLoss:
      return "node_loss";
    case K::kNodeReturn:
      return "node_return";
    case K::kHeartbeat:
      return "heartbeat";
    case K::kHang:
      return "hang";
    case K::kStop:
      return "stop";
    case K::kUnhealthy:
      return "node_unhealthy";
    case K::kDeviceMemoryWait:
      return "device_memory_wait";
  }
  return "unknown";  // not reached: every kind has a case; g++ wants a return after the switch
}

JobEvents* NoJobEvents() {
  static Ignore ignore;  // stateless
  return &ignore;
}

void JobEventHub::Add(JobEvents* listener) {
  if (listener != nullptr) listeners_.push_back(listener);
}

// In the order of Add: the launch adds the status first, so that whoever reads an event's
// line in events.jsonl and then asks `gculaunch status` finds that event there too.
void JobEventHub::On(const JobEvent& event) {
  for (JobEvents* listener : listeners_) listener->On(event);
}

}  // namespace gculaunch
