// JobPolicy: the job-wide decisions of a multi-node job, as two pure state machines.
//
//   AgentStep(state, config, event) -> {state, actions}        every node, for its own ranks
//   CoordinatorStep(state, config, event) -> {state, actions}  node 0 only, for the job
//
// No Asio, no clock, no store: the executors (node_agent.h, coordinator.h) turn what the
// job board (job_board.h), the Supervisor and the timers report into events and carry out the
// actions.  The keys and messages are in job_protocol.h; docs/multinode.md has the whole
// protocol and tests/launcher/cluster/job_policy_test.cc the tables.
//
// One epoch, seen by an agent:
//   kJoining --Plan(e)--> kRunning: StartRanks(e), WatchMarker(e)   (the join's admission)
//   kWaitingPlan --Plan(e)--> the same                               (the nodes that stayed)
//   a local failure (LocalStop)        -> PublishMarker(e, what failed) (first writer wins)
//   the epoch's marker arrives (Marker) -> StopRanks unless the ranks already stopped
//   the ranks drained (Drained)        -> ReportDone(e) when they all succeeded and no
//                                         marker is known yet (the coordinator publishes
//                                         the success marker once every node is done)
//   marker known and ranks drained     -> Restartable: ReportReaped(e), WaitPlan(e+1); or,
//                                         when node 0 is gone or the marker says this node
//                                         was lost, Join again (-> kJoining)
//                                         otherwise:   ExitRanks(code) -> kLeaving
//   node 0 lost (MasterLost)           -> a node_lost marker of its own; Join again once the
//                                         ranks are gone (while the budget allows)
//   the Supervisor finished            -> SayBye(code) (a member only), Finish(code)
// and by the coordinator:
//   kGathering: join requests checked (identity, settings, node rank free); all present ->
//               PublishPlan(first epoch), Admit every joined node (the first epoch is 0, or
//               the highest epoch a node reports + 1 when node 0 itself came back)
//   kRunning(e): every node done -> PublishMarker(e, success); a node silent, gone or left ->
//               it is away, PublishMarker(e, lost/left); the marker decides:
//   kRestarting(e): every node back and reaped -> BeginAttempt(e+1), PublishPlan(e+1), Admit
//               the returned nodes; a node away longer than the deadline -> abort everywhere.
//               A crash loop backs off first (--restart-backoff, restart_backoff.h, from how
//               long epoch e ran, told with its Marker): ArmBackoff(e+1, delay), and the
//               epoch starts at BackoffOver(e+1), so every node waits the same
//   kFinishing: every node said bye or is away -> Finish (the store may stop)
//
// Thread safety: pure functions over values.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "launcher/cluster/job_protocol.h"
#include "launcher/run/restart_backoff.h"
#include "launcher/run/restart_policy.h"

namespace gculaunch::job {

// =================================== agent ===================================

struct AgentConfig {
  int node_rank = 0;
  int max_restarts = 0;
  int rdzv_timeout_s = 900;  ///< how long the job waits for a lost node (messages)
  std::string master_host;   ///< for a lost master's marker ("node 0 (MASTER_ADDR)")
  std::string master_addr;
};

struct AgentState {
  enum class Phase {
    kJoining,      ///< (re)connecting, joining, waiting for the admission
    kWaitingPlan,  ///< stayed in the job: waiting for the plan of `epoch`
    kRunning,      ///< the ranks of `epoch` run, or were stopped and are draining
    kLeaving,      ///< the job is over for this node; the Supervisor is finishing
    kDone,         ///< bye said; the executor is finished
  };
  Phase phase = Phase::kJoining;
  int epoch = 0;
  int restarts = 0;       ///< the restarts the job had used when `epoch` started (its plan)
  int last_epoch = -1;    ///< the last epoch whose ranks this node started; -1: none
  bool stopping = false;  ///< the ranks of `epoch` were told to stop, or stop by themselves
  bool drained = false;   ///< every rank of `epoch` is gone
  bool marker_published = false;
  bool master_lost = false;          ///< node 0's store went away during `epoch`
  std::optional<StopMarker> marker;  ///< the marker of `epoch` once read
  /// A teardown signal stopped this node: it leaves with this code, whatever the marker says.
  std::optional<int> signalled_code;
  int exit_code = -1;  ///< decided (kLeaving) or final (kDone)
  bool operator==(const AgentState&) const = default;
};

struct AgentEvent {
  enum class Kind {
    kStart,               ///< the executor is ready: join the job
    kPlan,                ///< `plan`: the admission, or the awaited epoch's plan (or abort)
    kMarker,              ///< `marker` of the current epoch
    kLocalStop,           ///< the Supervisor began a local teardown: `stop`
    kDrained,             ///< the ranks drained; `success`: all exited 0
    kSupervisorFinished,  ///< the Supervisor finished with `exit_code`
    kMasterLost,          ///< the master's store is gone: `what` (non-master nodes)
  };
  Kind kind;
  JobPlan plan;
  StopMarker marker;
  LocalStopReport stop;
  bool success = false;
  int exit_code = 0;
  std::string what;

  static AgentEvent Start() { return {Kind::kStart}; }
  static AgentEvent Plan(JobPlan plan);
  static AgentEvent Marker(StopMarker marker);
  static AgentEvent LocalStop(LocalStopReport stop);
  static AgentEvent Drained(bool success);
  static AgentEvent SupervisorFinished(int exit_code);
  static AgentEvent MasterLost(std::string what);
};

struct AgentAction {
  enum class Kind {
    kJoin,           ///< (re)connect, send a join request with `epoch` as the last epoch run,
                     ///< wait for the admission, deliver Plan
    kWaitPlan,       ///< wait for the plan of `epoch`, deliver Plan
    kStartRanks,     ///< start the ranks of `epoch` laid out by `plan`
    kWatchMarker,    ///< wait for the marker of `epoch`, deliver Marker
    kPublishMarker,  ///< COMPARE_SET the marker of `epoch` to `marker` (first wins)
    kStopRanks,      ///< Supervisor::JobStop
    kReportDone,     ///< SET done/<epoch>/<node>
    kReportReaped,   ///< SET reaped/<epoch>/<node>
    kExitRanks,      ///< Supervisor::JobExit(exit_code)
    kSayBye,         ///< SET bye/<node>/<join> = exit_code
    kFinish,         ///< the agent is finished; gculaunch exits with exit_code
  };
  Kind kind;
  int epoch = 0;
  JobPlan plan;
  StopMarker marker;
  int exit_code = 0;
  bool operator==(const AgentAction&) const = default;
};

struct AgentStep {
  AgentState state;
  std::vector<AgentAction> actions;
};

AgentStep Step(const AgentState& state, const AgentConfig& config, const AgentEvent& event);
std::string ActionName(const AgentAction& action);

// ================================= coordinator =================================

struct CoordinatorConfig {
  int nnodes = 1;  ///< fixed size: the node count; elastic: MAX
  /// elastic: MIN (<= nnodes); 0: a fixed-size job.  MIN = MAX is a fixed size on the elastic
  /// path (drawn ids, node ranks per plan): every job on etcd.
  int min_nodes = 0;
  int max_restarts = 0;
  NodeRegistration master;   ///< node 0's own registration: the reference for the others
  int rdzv_timeout_s = 900;  ///< for the "did not join" / "did not come back" messages
  int last_call_s = 30;      ///< elastic: --rdzv-conf last_call_timeout, for messages
  /// A job on etcd: "node 0" is the leader elected for the term, not a fixed host; the
  /// messages of a takeover say so.
  bool elected_leader = false;
  BackoffConfig backoff;  ///< --restart-backoff (default off here; 1:60 from the launch spec)
  bool elastic() const { return min_nodes > 0 && min_nodes <= nnodes; }
};

/// A node of the job, as its latest accepted join request describes it.  Members are keyed by
/// their registration's node_rank: the node rank in a fixed-size job, the node id (0 for the
/// store host, then 1, 2, ... in the order the join requests were numbered) in an elastic one.
struct Member {
  NodeRegistration reg;
  int seq = 0;            ///< the join request accepted
  bool admitted = false;  ///< its admission (first plan) was written
  bool away = false;      ///< lost, or left: the job waits for it to come back
  StopMarker gone;        ///< why it is away
  bool operator==(const Member&) const = default;
};

struct CoordinatorState {
  enum class Phase {
    kGathering,   ///< waiting for every node's join (first start, or a new node 0)
    kRunning,     ///< epoch `epoch` runs; its marker is not known yet
    kRestarting,  ///< the marker of `epoch` re-forms the job: waiting for reaps and returns
    kFinishing,   ///< the job is over: waiting for every node's bye
    kDone,        ///< the store may stop
  };
  Phase phase = Phase::kGathering;
  int epoch = 0;
  int restarts = 0;        ///< restarts used when `epoch` started (TORCHELASTIC_RESTART_COUNT)
  bool ran = false;        ///< an epoch started (a misfit arriving now is refused, not fatal)
  std::vector<int> order;  ///< the members in `epoch`'s plan, in node-rank order
  bool last_call = false;  ///< elastic, kGathering: MIN reached, the last-call timer is armed
  bool last_call_passed = false;  ///< elastic, kGathering: the last call window is over
  int adopted = -1;               ///< kGathering: the highest last epoch the joined nodes report
  std::map<int, Member> members;
  std::set<int> done;                ///< of `epoch`
  std::set<int> reaped;              ///< of `epoch`
  std::set<int> bye;                 ///< members whose current join said bye
  std::optional<StopMarker> marker;  ///< of `epoch`, once read
  bool marker_published = false;     ///< the coordinator wrote a marker of `epoch`
  BackoffState backoff;              ///< the crash loop's streak, from epoch to epoch
  double backoff_s = 0;              ///< kRestarting: the wait before epoch+1 (0: none)
  bool backoff_armed = false;        ///< kRestarting: ArmBackoff was issued for epoch+1
  bool backoff_over = false;         ///< kRestarting: BackoffOver(epoch+1) arrived
  bool operator==(const CoordinatorState&) const = default;
};

struct CoordinatorEvent {
  enum class Kind {
    kJoin,               ///< node `node` sent join request `seq`: `reg` (decoded)
    kBadJoin,            ///< node `node` sent an undecodable join request `seq`: `what`
    kRendezvousTimeout,  ///< --rdzv-timeout passed while gathering
    kMissingTick,        ///< every 10 s: log what is still missing
    kDone,               ///< node `node` reported done for `epoch`
    kReaped,             ///< node `node` reported reaped for `epoch`
    kMarker,             ///< the marker of `epoch` was read: `marker`
    kBye,                ///< node `node` (join `seq`) is leaving with `exit_code`
    kNodeSilent,         ///< node `node` (join `seq`) stopped heartbeating or hung up: `what`
    kRejoinTimeout,      ///< node `node` has been away for --rdzv-timeout
    kLastCall,           ///< elastic: last_call_timeout passed since MIN nodes were present
    kBackoffOver,        ///< the back-off before `epoch` is over
  };
  Kind kind;
  int node = -1;
  int seq = 0;
  int epoch = 0;
  NodeRegistration reg;
  StopMarker marker;
  int exit_code = 0;
  std::string what;
  double ran_s = 0;  ///< kMarker: how long the epoch ran (its plan to its marker)

  static CoordinatorEvent Join(int seq, NodeRegistration reg);
  static CoordinatorEvent BadJoin(int node, int seq, std::string what);
  static CoordinatorEvent RendezvousTimeout() { return {Kind::kRendezvousTimeout}; }
  static CoordinatorEvent MissingTick() { return {Kind::kMissingTick}; }
  static CoordinatorEvent Done(int epoch, int node);
  static CoordinatorEvent Reaped(int epoch, int node);
  static CoordinatorEvent Marker(StopMarker marker, double ran_s = 0);
  static CoordinatorEvent Bye(int node, int seq, int exit_code);
  static CoordinatorEvent NodeSilent(int node, int seq, std::string what);
  static CoordinatorEvent RejoinTimeout(int node);
  static CoordinatorEvent LastCall() { return {Kind::kLastCall}; }
  static CoordinatorEvent BackoffOver(int epoch);
};

struct CoordinatorAction {
  enum class Kind {
    kAdmit,          ///< SET admit/<node>/<seq> = plan (a plan to start with, or an abort)
    kPublishPlan,    ///< SET plan/<epoch> = plan (the executor fills in ranks_port)
    kBeginAttempt,   ///< the store's BeginAttempt(epoch): every rank of epoch-1 is reaped
    kPublishMarker,  ///< COMPARE_SET stop/<epoch> from "" to `marker`
    kWatchEpoch,     ///< wait for stop/<epoch>, done/<epoch>/*, reaped/<epoch>/*
    kLogMissing,     ///< log `text` (and publish it as job/missing)
    kLog,            ///< log `text` as a warning
    kArmLastCall,    ///< elastic: deliver LastCall after last_call_timeout (armed once)
    kArmBackoff,     ///< wait `delay_s`, then deliver BackoffOver(epoch); `marker`: why
    kFinish,         ///< every node is gone: the store may stop
  };
  Kind kind;
  int epoch = 0;
  int node = -1;
  int seq = 0;
  JobPlan plan;
  StopMarker marker;
  std::string text;
  double delay_s = 0;  ///< kArmBackoff
  bool operator==(const CoordinatorAction&) const = default;
};

struct CoordinatorStep {
  CoordinatorState state;
  std::vector<CoordinatorAction> actions;
};

CoordinatorStep Step(const CoordinatorState& state, const CoordinatorConfig& config,
                     const CoordinatorEvent& event);
std::string ActionName(const CoordinatorAction& action);

/// "1, 2 and 5" for messages.
std::string JoinNodes(const std::vector<int>& nodes);

}  // namespace gculaunch::job
