// CoordinatorPolicy: node 0's job-wide decisions in a multi-node job, as a pure state machine.
//
//   job::Step(state, config, event) -> CoordinatorStep {state, actions}  node 0, for the job
//
// Its counterpart on every node is the agent's machine (agent_policy.h).  No Asio, no clock,
// no store: the executor (coordinator.h) turns what the job board (job_board.h) and the timers
// report into events and carries out the actions.  The keys and messages are in
// job_protocol.h; docs/multinode.md has the whole protocol and
// tests/launcher/cluster/coordinator_policy_test.cc the tables.
//
// One epoch, seen by the coordinator:
//   kGathering: join requests checked (identity, settings, node rank free); all present ->
//               PublishPlan(first epoch), Admit every joined node (the first epoch is 0, or
//               the highest epoch a node reports + 1 when node 0 itself came back)
//   kRunning(e): every node done -> PublishMarker(e, success); a node silent, gone or left ->
//               it is away, PublishMarker(e, lost/left); the marker decides:
//   kRestarting(e): every node back and reaped -> BeginAttempt(e+1), PublishPlan(e+1), Admit
//               the returned nodes; a node away longer than the deadline -> abort everywhere.
//               A crash loop backs off first (--restart-backoff, restart_backoff.h, from how
//               long epoch e ran, told with its Marker): ArmBackoff(e+1, delay), and the
//               epoch starts at BackoffOver(e+1), so every node waits the same.  Before
//               that, once every node reaped, the failure streak (failure_streak.h) may
//               end the loop for the job: the failing node's signature and the highest
//               progress number, from the nodes' reaped reports -> abort everywhere with a
//               same_failure marker (every node exits with the failed rank's code)
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

namespace gculaunch::job {

struct CoordinatorConfig {
  int nnodes = 1;  ///< fixed size: the node count; elastic: MAX
  /// elastic: MIN (<= nnodes); 0: a fixed-size job.  MIN = MAX is a fixed size on the elastic
  /// path (drawn ids, node ranks per plan): every job whose leader is elected.
  int min_nodes = 0;
  int max_restarts = 0;
  NodeRegistration node0;    ///< node 0's own registration: the reference for the others
  int rdzv_timeout_s = 900;  ///< for the "did not join" / "did not come back" messages
  int last_call_s = 30;      ///< elastic: --rdzv-conf last_call_timeout, for messages
  /// An elected leader (RdzvCapabilities): "node 0" is the leader of the term, not a fixed host;
  /// the messages of a takeover say so.
  bool elected_leader = false;
  /// Node ranks at rendezvous on the built-in store: why this node hosts the store
  /// (MatchThisHost, --rdzv-conf is_host), for the "waiting for nodes" lines; empty: not said.
  std::string host_why;
  BackoffConfig backoff;  ///< --restart-backoff (default off here; 1:60 from the launch spec)
  StreakConfig streak;    ///< --max-same-failures, --progress-file (default off here)
  bool elastic() const { return min_nodes > 0 && min_nodes <= nnodes; }
  /// MIN = MAX on the built-in store (c10d without node ranks): a node keeps its node rank
  /// across epochs, a newcomer takes a vacated one, and one beyond MAX is refused.
  bool fixed_at_rendezvous() const { return min_nodes == nnodes && !elected_leader; }
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
  /// The members added, removed or replaced, or gone away, since the executor last looked (it
  /// clears this; an id may repeat): it re-reads those members alone (heartbeats, byes,
  /// member events), not every member on every event.
  std::vector<int> roster;
  std::set<int> done;                    ///< of `epoch`
  std::set<int> reaped;                  ///< of `epoch`
  std::set<int> bye;                     ///< members whose current join said bye
  std::optional<StopMarker> marker;      ///< of `epoch`, once read
  bool marker_published = false;         ///< the coordinator wrote a marker of `epoch`
  BackoffState backoff;                  ///< the crash loop's streak, from epoch to epoch
  double backoff_s = 0;                  ///< kRestarting: the wait before epoch+1 (0: none)
  bool backoff_armed = false;            ///< kRestarting: ArmBackoff was issued for epoch+1
  bool backoff_over = false;             ///< kRestarting: BackoffOver(epoch+1) arrived
  std::map<int, AttemptReport> reports;  ///< of `epoch`: each node's reaped report
  double ran_s = 0;                      ///< how long `epoch` ran (its Marker event)
  StreakState streak;                    ///< the failure streak, from epoch to epoch
  bool streak_checked = false;           ///< kRestarting: the streak heard `epoch`
  /// kRestarting, a fixed-size job: every node rank below it was back and had reaped at
  /// MaybeRestart's last look, and no step named it in `roster` since (a change lowers it),
  /// so a restart of N nodes looks at each node about once, not N times.
  int restart_ready = 0;
  bool operator==(const CoordinatorState&) const = default;
};

struct CoordinatorEvent {
  enum class Kind {
    kJoin,               ///< node `node` sent join request `seq`: `reg` (decoded)
    kBadJoin,            ///< node `node` sent an undecodable join request `seq`: `what`
    kRendezvousTimeout,  ///< --rdzv-timeout passed while gathering
    kMissingTick,        ///< every 10 s: log what is still missing
    kDone,               ///< node `node` reported done for `epoch`
    kReaped,             ///< node `node` reported reaped for `epoch`, with `report`
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
  double ran_s = 0;      ///< kMarker: how long the epoch ran (its plan to its marker)
  AttemptReport report;  ///< kReaped

  static CoordinatorEvent Join(int seq, NodeRegistration reg);
  static CoordinatorEvent BadJoin(int node, int seq, std::string what);
  static CoordinatorEvent RendezvousTimeout() { return {Kind::kRendezvousTimeout}; }
  static CoordinatorEvent MissingTick() { return {Kind::kMissingTick}; }
  static CoordinatorEvent Done(int epoch, int node);
  static CoordinatorEvent Reaped(int epoch, int node, AttemptReport report = {});
  static CoordinatorEvent Marker(StopMarker marker, double ran_s = 0);
  static CoordinatorEvent Bye(int node, int seq, int exit_code);
  static CoordinatorEvent NodeSilent(int node, int seq, std::string what);
  static CoordinatorEvent RejoinTimeout(int node);
  static CoordinatorEvent LastCall() { return {Kind::kLastCall}; }
  static CoordinatorEvent BackoffOver(int epoch);
};

struct CoordinatorAction {
  enum class Kind {
    kAdmit,          ///< SET admit/<node>/<seq> = plan: an abort, or the plan of `epoch`
                     ///< published before it in the same step (`plan` then holds only the
                     ///< epoch and restarts: N admissions do not carry N copies of the plan)
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

/// `state` is taken by value: the coordinator moves its state in (a job's state holds every
/// member, and a copy per event made a job of N nodes cost O(N^2) while it gathered).
CoordinatorStep Step(CoordinatorState state, const CoordinatorConfig& config,
                     const CoordinatorEvent& event);
std::string ActionName(const CoordinatorAction& action);

/// "1, 2 and 5" for messages.
std::string JoinNodes(const std::vector<int>& nodes);

}  // namespace gculaunch::job
