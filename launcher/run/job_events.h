// JobEvent and JobEvents: what happened to a job, told once and heard by several listeners.
//
// The code that sees something happen (the Supervisor: ranks started and exited, a restart;
// the node agent: the epoch's rendezvous; node 0's coordinator: nodes joining, lost and
// back; the job: launch and stop) builds one JobEvent and calls JobEvents::On.  Listeners:
//   EventLog      appends it as one JSON line to "<run log dir>/events.jsonl"
//                 (launcher/ops/event_log.h; docs/operations.md lists every event and field)
//   JobStatus     keeps the live picture for `gculaunch status` and /metrics
//                 (launcher/ops/status_model.h)
// JobEventHub forwards one event to every listener added to it.  Callers that may run without
// any listener hold NoJobEvents(), which ignores everything, so a call site is one line.
//
// Ownership: a hub borrows its listeners; they must outlive it.
// Thread safety: the io_context's thread only (the events come from the event loop).
#pragma once

#include <sys/types.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/outcome.h"
#include "launcher/sys/worker_exit.h"

namespace gculaunch {

/// The "schema" field of every line of events.jsonl; bumped when a field changes meaning or
/// disappears (new fields and events do not bump it).
inline constexpr int kEventSchema = 1;

struct JobEvent {
  enum class Kind {
    kLaunch,      ///< gculaunch starts the job: run id, layout, node rank, nnodes, ...
    kRendezvous,  ///< the membership of `epoch` is settled (nodes, world size), `duration_s`
    kRankStart,   ///< rank `rank` (local `local_rank`) of `epoch` runs as `pid`
    kRankExit,    ///< that rank was reaped: `exit` (code or signal)
    kRestart,     ///< attempt `epoch` begins after a failure: `reason`, `restarts`, the
                  ///< back-off it waited `backoff_s`
    kBackoff,     ///< a crash loop backs off: attempt `epoch` starts in `backoff_s`
                  ///< (--restart-backoff), after `reason`
    kNodeJoin,    ///< node 0: node `node` joined (`host`, `addr`)
    kNodeLoss,    ///< node 0: node `node` is lost: `reason`
    kNodeReturn,  ///< node 0: node `node` is back (`addr`)
    kHeartbeat,   ///< node 0: node `node` heartbeated (not written to events.jsonl)
    kHang,        ///< a hang was called (--hang-timeout): `timeout_s`, `silent_s`, `action`,
                  ///< `odd_ranks`, `reason` (single node, and node 0 of several)
    kUnhealthy,   ///< the health gate before attempt `epoch` found `cards` unhealthy: `reason`
                  ///< (the checks, one line); the node steps aside (exit 5)
    kStop,        ///< gculaunch ends with `exit_code` (under --exit-codes): `outcome`
                  ///< (`reason` holds its name), the rank scheme's `rank_exit_code`
    kDeviceMemoryWait,  ///< before attempt `epoch` gculaunch waited `duration_s` for `cards`'
                        ///< device memory (`reason`: "card 0: 3000 MiB"); `freed`: it was, else
                        ///< the bound passed and `cards` still held it
  };
  Kind kind = Kind::kLaunch;
  int epoch = -1;
  int rank = -1;
  int local_rank = -1;
  pid_t pid = -1;
  int node = -1;
  std::optional<WorkerExit> exit;
  int exit_code = 0;
  int rank_exit_code = 0;                ///< kStop
  Outcome outcome = Outcome::kInternal;  ///< kStop
  int restarts = 0;                      ///< restarts used (kRestart), also the epoch
  int max_restarts = 0;                  ///< --max-restarts (kRestart)
  int nodes = 0;                         ///< kRendezvous
  int world_size = 0;                    ///< kRendezvous
  double duration_s = -1;  ///< kRendezvous: how long it took; kRestart: from the stop; <0: n/a
  double backoff_s = 0;    ///< kRestart: the back-off waited before it; kBackoff: the wait
  std::string reason;
  std::string host;
  std::string addr;
  double timeout_s = 0;            ///< kHang: --hang-timeout
  double silent_s = 0;             ///< kHang: how long the job was silent
  std::string action;              ///< kHang: --on-hang (stop, restart, report)
  std::vector<int> odd_ranks;      ///< kHang: the ranks whose stacks differ from the majority
  nlohmann::json launch;           ///< kLaunch: the launch's fields (an object)
  std::vector<std::string> cards;  ///< kUnhealthy: the unhealthy cards; kDeviceMemoryWait: held
  bool freed = false;              ///< kDeviceMemoryWait

  static JobEvent Launch(nlohmann::json fields);
  static JobEvent Rendezvous(int epoch, int nodes, int world_size, double duration_s);
  static JobEvent RankStart(int epoch, int rank, int local_rank, pid_t pid);
  static JobEvent RankExit(int epoch, int rank, int local_rank, pid_t pid, WorkerExit exit);
  static JobEvent Restart(int restarts, int max_restarts, std::string reason, double since_stop_s);
  static JobEvent Backoff(int restarts, double backoff_s, std::string reason);
  static JobEvent NodeJoin(int node, std::string host, std::string addr);
  static JobEvent NodeLoss(int node, std::string reason);
  static JobEvent NodeReturn(int node, std::string addr);
  static JobEvent Heartbeat(int node);
  static JobEvent Hang(int epoch, double timeout_s, double silent_s, std::string action,
                       std::vector<int> odd_ranks, std::string reason);
  static JobEvent Unhealthy(int epoch, std::vector<std::string> cards, std::string reason);
  static JobEvent Stop(int exit_code, Outcome outcome, int rank_exit_code);
  static JobEvent DeviceMemoryWait(int epoch, double waited_s, bool freed,
                                   std::vector<std::string> cards, std::string held);
};

/// "launch", "rank_start", ...: the "event" field of the JSON line.
const char* EventName(JobEvent::Kind kind);

class JobEvents {
 public:
  virtual ~JobEvents() = default;
  virtual void On(const JobEvent& event) = 0;
};

/// A listener that ignores every event (stateless; lives for the whole program).
JobEvents* NoJobEvents();

class JobEventHub : public JobEvents {
 public:
  /// Adds a listener; null is ignored.
  void Add(JobEvents* listener);
  void On(const JobEvent& event) override;

 private:
  std::vector<JobEvents*> listeners_;
};

}  // namespace gculaunch
