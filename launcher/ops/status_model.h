// JobStatus: the live picture of one node's part of a job, built from its JobEvents
// (launcher/run/job_events.h) for `gculaunch status` (status_view.h) and /metrics (metrics.h).
//
// It holds what the events tell: the launch's identity and layout, the current epoch and its
// ranks (pid, start, exit), the restarts and how long they took, the epochs' rendezvous
// durations, every rank exit counted by its code, and on node 0 the job's nodes (address,
// present or lost, last heartbeat).  What only the kernel knows (CPU, RSS) is sampled by the
// readers when they render.
//
// Time: `now` gives unix seconds (a fake in tests).
// Thread safety: the io_context's thread only.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launcher/run/job_events.h"

namespace gculaunch {

struct RankStatus {
  int epoch = 0;
  int rank = 0;
  int local_rank = 0;
  pid_t pid = -1;
  double start_time = 0;  ///< unix seconds
  std::optional<WorkerExit> exit;
  double exit_time = 0;
  bool running() const { return !exit.has_value(); }
};

struct NodeStatus {
  int node = 0;
  std::string host;
  std::string addr;
  bool present = true;        ///< false: lost, the job waits for it (or ended without it)
  double joined_time = 0;     ///< unix seconds of its latest join
  double last_heartbeat = 0;  ///< unix seconds; 0: none seen yet
  std::string lost_reason;    ///< why it was lost last
  int losses = 0;
};

/// A running sum of durations (a Prometheus summary without quantiles).
struct DurationStats {
  int count = 0;
  double sum_s = 0;
  double last_s = -1;  ///< <0: none yet
  void Add(double seconds);
};

/// What the events told so far (a value: readers copy or borrow it).
struct JobSnapshot {
  // ---- identity (from the launch event) ----
  std::string run_id;
  int node_rank = 0;
  int nnodes = 1;
  int nproc_per_node = 0;
  int max_restarts = 0;
  std::string layout;
  std::string host;
  pid_t launcher_pid = -1;
  double launch_time = 0;  ///< unix seconds

  // ---- progress ----
  int epoch = -1;                 ///< the epoch whose ranks run or ran last; -1: none yet
  int restarts = 0;               ///< restarts used
  std::vector<RankStatus> ranks;  ///< the current epoch's ranks, in start order
  /// Every rank exit so far, by its shell code (0-255; 128+N for signal N).
  std::map<int, int> exits_by_code;
  DurationStats rendezvous;
  DurationStats restart_durations;  ///< from the stop to the restart
  /// --restart-backoff: the wait before the next restart while one is under way (0: none),
  /// and when it ends (unix seconds).
  double restart_backoff_s = 0;
  double next_restart_time = 0;
  std::map<int, NodeStatus> nodes;  ///< node 0 of a multi-node job: every node seen
  int node_losses = 0;
  std::optional<int> exit_code;  ///< once the job stopped
  std::string stop_reason;
  /// The health gate found this node unhealthy: the cards and the checks (one line); the node
  /// steps aside.  Empty: healthy, or not checked yet.
  std::vector<std::string> unhealthy_cards;
  /// Restarts that waited for the last attempt's device memory, and those of them whose
  /// --device-memory-wait passed with memory still held.
  int device_memory_waits = 0;
  int device_memory_held = 0;
  std::string unhealthy;
  std::optional<Outcome> outcome;  ///< once the job stopped (base/outcome.h)

  int RanksRunning() const;
  int NodesPresent() const;
  int NodesLost() const;
};

class JobStatus : public JobEvents {
 public:
  using Clock = std::function<double()>;
  /// `now`: unix seconds; empty: the real clock.
  explicit JobStatus(Clock now = {});

  void On(const JobEvent& event) override;

  double Now() const { return now_(); }
  const JobSnapshot& snapshot() const { return s_; }

 private:
  void OnRank(const JobEvent& e);
  void OnNode(const JobEvent& e);
  Clock now_;
  JobSnapshot s_;
};

}  // namespace gculaunch
