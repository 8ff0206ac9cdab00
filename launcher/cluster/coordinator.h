// Coordinator: the job-wide half of a multi-node job, run by node 0's gculaunch next to the
// store it hosts.
//
// The thin executor of job::CoordinatorStep (coordinator_policy.h).  Its inputs come from the job
// board (job_board.h; never polled): join requests, done / reaped reports, the epochs' stop
// markers and the nodes' byes, and a node's control connection hanging up without a bye (its
// gculaunch was killed: lost at once, not after the heartbeat timeout); plus timers:
//   every `missing_period` (10 s)  what is still missing (nodes to join, nodes to come back),
//                                  logged and published for the other nodes' progress lines
//   `rdzv_timeout`                 nodes that never joined end the job (exit code 3); a lost
//                                  node that did not come back this long ends it (exit 4)
//   every `heartbeat_check`        a node silent over an open connection for longer than
//                                  the silence bound is lost (liveness.h: the bound adapts
//                                  to the gaps seen, within `silence`; this process's own
//                                  lateness is not counted against the nodes)
//   a back-off (ArmBackoff)        a crash loop waits before the next epoch starts
//                                  (--restart-backoff), the same for every node
// Its outputs: admissions, plans, markers, and BeginAttempt on the ranks' key space, which
// happens only after every node reported its ranks of the old epoch reaped.
//
// Lifetime: Start(), then run the io_context until finished() (every node said bye or is
// away, or node 0 itself left); the store must stay up until then.  `board` and `log`
// outlive it.
// Thread safety: the io_context's thread only.
#pragma once

#include <spdlog/logger.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/lifetime.h"
#include "launcher/cluster/coordinator_policy.h"
#include "launcher/cluster/job_board.h"
#include "launcher/cluster/liveness.h"
#include "launcher/cluster/member_events.h"
#include "launcher/run/job_events.h"

namespace gculaunch {

struct CoordinatorSettings {
  job::CoordinatorConfig config;
  std::chrono::milliseconds rdzv_timeout{std::chrono::minutes(15)};
  std::chrono::milliseconds missing_period{10000};
  std::chrono::milliseconds heartbeat_check{250};
  /// Nodes whose join requests each heartbeat check looks at for a gap (CheckJoinGaps).
  std::size_t join_gap_slice = 1024;
  /// How long a node may stay silent while its connection is up (--node-timeout).
  job::SilenceRule silence;
  /// Elastic: --rdzv-conf last_call_timeout, counted from the moment MIN nodes are present.
  std::chrono::milliseconds last_call{30000};
  /// MASTER_PORT of the ranks, published in each plan: 0 = the agent store's port (the ranks
  /// use gculaunch's store); >0 a fixed port (--no-agent-store --worker-port); -1 = a port
  /// that is free on this node, chosen per epoch (--no-agent-store: rank 0 binds it).
  int ranks_port = 0;
  JobEvents* events = NoJobEvents();  ///< nodes joining, lost and back (launcher/run/job_events.h)
};

class Coordinator {
 public:
  Coordinator(boost::asio::io_context& io, CoordinatorBoard& board, CoordinatorSettings settings,
              spdlog::logger& log);
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  void Start();
  bool finished() const { return state_.phase == job::CoordinatorState::Phase::kDone; }
  const job::CoordinatorState& state() const { return state_; }
  /// The nodes other than node 0 that node 0 asks for stacks and progress reports, by their
  /// board key: the members of the current epoch's plan (an elastic job's drawn ids); before
  /// the first plan, the nodes that joined (elastic) or node ranks 1..N-1 (fixed size).
  std::vector<int> OtherMembers() const;

 private:
  void WatchJoins(int node, int seq);
  void WatchIds(int id);
  void Dispatch(const job::CoordinatorEvent& event);
  void Execute(const job::CoordinatorAction& action);
  void Track(const std::vector<int>& changed);
  void WatchEpoch(int epoch);
  void PublishPlan(job::JobPlan plan);
  void ArmBackoff(const job::CoordinatorAction& action);
  void ArmMissing();
  void ArmHeartbeatCheck();
  void CheckHeartbeats();
  void ReportLate(std::chrono::steady_clock::time_point now,
                  std::chrono::steady_clock::duration late);
  void CheckJoinGaps();

  struct Beat {
    int seq = 0;
    std::string value;
    job::PeerSilence silence;
  };

  CoordinatorBoard& board_;
  CoordinatorSettings settings_;
  spdlog::logger& log_;
  job::CoordinatorState state_;
  MemberFlags members_seen_;   ///< what ReportMembers saw of each member
  std::map<int, Beat> beats_;  ///< members not away
  std::map<int, std::chrono::steady_clock::time_point> away_;  ///< since when
  std::map<int, int> next_join_;                               ///< the join watched per node
  int gap_cursor_ = 0;          ///< CheckJoinGaps: the node key the next tick starts at
  int next_id_ = 1;             ///< elastic: the node id whose first join request is watched next
  bool info_complete_ = false;  ///< job/info holds node 0's own registration
  /// A published plan, as admissions repeat it.
  struct Published {
    job::JobPlan plan;
    std::map<int, std::size_t> entry;  ///< node key -> its entry in plan.nodes
    std::string whole;                 ///< plan encoded, once a node of an older gculaunch asks
  };
  static Published Publish(job::JobPlan plan);
  /// What node `node` reads of `published`: its own plan, or the whole one for a node of a
  /// gculaunch before per-node plans.
  std::string PlanTextFor(Published& published, int node);
  /// `published` encoded whole (once), for nodes of a gculaunch before per-node plans.
  static const std::string& WholeText(Published& published);
  /// Whether member `node` registered as reading its own plan.
  bool ReadsOwnPlan(int node) const;
  std::map<int, Published> plans_;  ///< per epoch (not aborts)
  boost::asio::steady_timer missing_timer_;
  boost::asio::steady_timer deadline_timer_;
  boost::asio::steady_timer heartbeat_timer_;
  boost::asio::steady_timer last_call_timer_;
  boost::asio::steady_timer backoff_timer_;
  std::chrono::steady_clock::time_point started_;
  job::OwnLag lag_;  ///< this process's own lateness, from the heartbeat check's ticks
  std::chrono::steady_clock::time_point late_reported_{};  ///< ReportLate's last line
  std::chrono::steady_clock::time_point stopped_{};        ///< when the last marker was read
  std::chrono::steady_clock::time_point epoch_began_{};    ///< the current epoch's plan
  LifetimeGuard lifetime_;                                 ///< last member: expires first
};

}  // namespace gculaunch
