// AgentPolicy: one node's decisions in a multi-node job, as a pure state machine.
//
//   job::Step(state, config, event) -> AgentStep {state, actions}  every node, for its ranks
//
// Its counterpart on node 0 is the coordinator's machine (coordinator_policy.h).  No Asio, no
// clock, no store: the executor (node_agent.h) turns what the job board (job_board.h) and the
// Supervisor report, the reconnect deadline included, into events and carries out the actions,
// the log lines too: what each outcome means for this node is worded here, by the branch that
// decides it.  The keys and messages are in job_protocol.h; docs/multinode.md has the whole
// protocol and tests/launcher/cluster/agent_policy_test.cc the tables.
//
// One epoch, seen by an agent:
//   kJoining --Plan(e)--> kRunning: StartRanks(e), WatchMarker(e)   (the join's admission)
//   kWaitingPlan --Plan(e)--> the same                               (the nodes that stayed)
//   a local failure (LocalStop)        -> PublishMarker(e, what failed) (first writer wins)
//   the epoch's marker arrives (Marker) -> Log(what it means here); StopRanks unless the ranks
//                                         already stopped
//   the ranks drained (Drained)        -> ReportDone(e) when they all succeeded and no
//                                         marker is known yet (the coordinator publishes
//                                         the success marker once every node is done)
//   marker known and ranks drained     -> Restartable: ReportReaped(e), WaitPlan(e+1); or,
//                                         when node 0 is gone or the marker says this node
//                                         was lost, Join again (-> kJoining)
//                                         otherwise:   ExitRanks(code) -> kLeaving
//   node 0 lost (Node0Lost)           -> a node_lost marker of its own; Join again once the
//                                         ranks are gone (while the budget allows); the first
//                                         loss of a return is logged once
//   joining again took too long        -> node 0 did not come back: Log, ExitRanks(4)
//     (RejoinDeadline, --rdzv-timeout)    -> kLeaving (no member: no bye)
//   the Supervisor finished            -> SayBye(code) (a member only), Finish(code); a node
//                                         whose cards are unhealthy (exit 5) first publishes a
//                                         restartable node_left marker naming the checks
//                                         (the job re-forms without it or waits for another)
//
// Thread safety: pure functions over values.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/cluster/job_protocol.h"
#include "launcher/run/restart_policy.h"

namespace gculaunch::job {

struct AgentConfig {
  int node_rank = 0;
  int max_restarts = 0;
  int rdzv_timeout_s = 900;  ///< how long the job waits for a lost node (messages)
  /// How a lost node 0's marker names it ("node 0 (MASTER_ADDR)"): MASTER_ADDR, or where the
  /// leader is elected the backend's words for it (RdzvCapabilities::leader_name).
  std::string node0_name;
  int nnodes = 1;  ///< --nnodes (elastic: MAX), for messages
  /// Elastic: MIN; 0: a fixed size.  With MIN < MAX a lost node's job re-forms without it.
  int min_nodes = 0;
  /// An elected leader (RdzvCapabilities): "node 0" is the leader of the term, not a fixed host,
  /// and any node may take a lost one's place; the messages say so.
  bool elected_leader = false;
  bool shrinks() const { return min_nodes > 0 && min_nodes < nnodes; }
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
  bool node0_lost = false;           ///< node 0's store went away during `epoch`
  std::optional<StopMarker> marker;  ///< the marker of `epoch` once read
  /// A teardown signal stopped this node: it leaves with this code, whatever the marker says.
  std::optional<int> signalled_code;
  /// kJoining: this join is a return after a loss (node 0's, or this node's place); the loss
  /// was told once, and the executor's --rdzv-timeout runs from it.  Cleared by the admission.
  bool returning = false;
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
    kNode0Lost,           ///< node 0's store is gone: `what` (the other nodes)
    /// Joining again, node 0 could not be reached within --rdzv-timeout of the loss: `what`
    /// (the last connection error).
    kRejoinDeadline,
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
  /// `unhealthy`: the health gate's line when the node leaves because its cards are unhealthy.
  static AgentEvent SupervisorFinished(int exit_code, std::string unhealthy = "");
  static AgentEvent Node0Lost(std::string what);
  static AgentEvent RejoinDeadline(std::string what);
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
    kLog,            ///< log `text` at `level`
  };
  enum class Level { kInfo, kWarn, kError };
  Kind kind;
  int epoch = 0;
  JobPlan plan;
  StopMarker marker;
  int exit_code = 0;
  Level level = Level::kInfo;  ///< kLog
  std::string text;            ///< kLog
  bool operator==(const AgentAction&) const = default;
};

struct AgentStep {
  AgentState state;
  std::vector<AgentAction> actions;
};

AgentStep Step(const AgentState& state, const AgentConfig& config, const AgentEvent& event);
/// "Join(-1)", "ExitRanks(4)", "Log[error: ...]": for tables and traces.
std::string ActionName(const AgentAction& action);
/// The kLog line that tells what marker `m` means for this node: a restart (which one, and
/// how the job re-forms), the end with its exit code, or a refusal.  Step() issues it for
/// every marker it learns; the executor for a refusal it finds itself before joining.
AgentAction MarkerLog(const StopMarker& m, const AgentConfig& config);

}  // namespace gculaunch::job
