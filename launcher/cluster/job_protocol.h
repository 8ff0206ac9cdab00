// The node agents' protocol: the keys they use in node 0's store and the messages those
// keys hold, as pure values with a JSON codec.  No I/O; docs/multinode.md tells the story.
//
// All keys live in the store's launcher namespace.  In-process users on node 0 name
// them as below; socket clients (the other nodes) put "gculaunch/" in front (KeyForSocket).
//
//   job/joinseq/<k>     counter (ADD 1): the number s of node k's next join request
//   job/join/<k>/<s>    NodeRegistration: node k's join request s (every gculaunch start,
//                       and every return after a loss, is a new request)
//   job/admit/<k>/<s>   the coordinator's answer to join request s: the JobPlan the node
//                       starts with (its own plan when it reads per-node plans), or an
//                       abort (refused, or the job ended meanwhile)
//   job/plan/<e>        JobPlan of epoch e, written by the coordinator: the "go" for the
//                       nodes that stayed; or an abort when epoch e will never run.  Read
//                       by nodes of a gculaunch before per-node plans (their registration
//                       has no "node_plans"); written only while such a node is a member,
//                       and for aborts
//   job/nodeplan/<e>/<k> node k's own plan of epoch e (PlanFor): the same "go" with only
//                       node k's entry, the node count and node rank 0's address, so that
//                       the bytes leaving node 0 per epoch grow with the nodes, not with
//                       their square; for every node whose registration says "node_plans"
//   job/stop/<e>        StopMarker of epoch e, first writer wins (COMPARE_SET from ""):
//                       a rank failed, a node was lost or left, or every node finished
//   job/done/<e>/<k>    node k's ranks of epoch e all exited 0 and were reaped
//   job/reaped/<e>/<k>  node k's ranks of epoch e were stopped and reaped (after a marker);
//                       the value is the node's AttemptReport (failure_streak.h): the
//                       signature of its failed rank, its --progress-file number ("1", an
//                       older gculaunch's value, reads as an empty report)
//   job/hb/<k>/<s>      heartbeat counter of node k's join s (ADD 1 per beat), k > 0
//   job/bye/<k>/<s>     node k (join s) is leaving; the value is its exit code
//   job/missing         the coordinator's latest "still missing" text, for the others' logs
//   job/info            node 0's registration: the job's identity and size
//   job/dumpreq         counter (ADD 1 by node 0): the number n of the latest stack-dump
//                       request (`gculaunch stacks` on node 0, a hang); every other node
//                       polls it while it runs
//   job/dump/<n>/<k>    node k's answer to dump request n: its stacks (stack_report.h,
//                       EncodeNodeStacks)
//   job/progress/<k>    node k's latest progress report (--hang-timeout, k > 0; job_hang.h):
//                       the epoch and each rank's progress ages; node 0 decides hangs
//
// Epoch e is TORCHELASTIC_RESTART_COUNT of the ranks it runs, and the number of restarts the
// job has used: every re-form (a rank failed, a node was lost or left) costs one.  An epoch's
// marker decides what follows (Restartable): the next epoch (after the nodes that went away
// came back), or the end of the job on every node with the exit code ExitCodeFor() gives.
//
// Thread safety: pure functions over values.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/outcome.h"
#include "launcher/run/failure_streak.h"

namespace gculaunch::job {

// ---- keys ----
std::string JoinSeqKey(int node);
std::string JoinKey(int node, int seq);
std::string AdmitKey(int node, int seq);
std::string PlanKey(int epoch);
std::string NodePlanKey(int epoch, int node);
std::string StopKey(int epoch);
std::string DoneKey(int epoch, int node);
std::string ReapedKey(int epoch, int node);
std::string HeartbeatKey(int node, int seq);
std::string ByeKey(int node, int seq);
/// Elastic jobs: counter (ADD 1) that gives every join request of a node other than the store
/// host a fresh node id k (1, 2, ...); the node then uses job/joinseq/<k> etc. as above.
inline constexpr const char* kNodeIdKey = "job/nodeid";
inline constexpr const char* kMissingKey = "job/missing";
/// Node 0's own registration, written first: a joining node checks that it belongs before it
/// asks (the coordinator watches join requests only for the node ranks the job has).
inline constexpr const char* kInfoKey = "job/info";
inline constexpr const char* kDumpRequestKey = "job/dumpreq";
std::string DumpKey(int request, int node);
/// Node k's latest progress report (--hang-timeout; launcher/cluster/job_hang.h).
std::string ProgressKey(int node);
/// The key as a socket client names it ("gculaunch/" + key).
std::string KeyForSocket(const std::string& key);

// ---- messages ----

/// What a node tells the job when it arrives.
struct NodeRegistration {
  int node_rank = 0;  ///< fixed size: the node rank; elastic: the node id (0: the store host)
  int nnodes = 1;     ///< fixed size: the node count; elastic: MAX
  int min_nodes =
      0;          ///< elastic: MIN (<= nnodes; = nnodes: fixed size, elected leader); 0: fixed size
  int nproc = 1;  ///< ranks on this node
  int max_restarts = 0;  ///< must agree job-wide
  /// --hang-timeout and --on-hang as text ("--hang-timeout 3 s, --on-hang stop", or "no
  /// --hang-timeout"): must agree job-wide; "" (an older gculaunch): not compared.
  std::string hang;
  std::string run_id;       ///< the job's identity: a node with another one is a stranger
  std::string host;         ///< gethostname(), for messages only
  std::string addr;         ///< numeric address that routes to node 0 (net_address.h)
  int pid = 0;              ///< the node's gculaunch, for messages
  std::string incarnation;  ///< fresh per gculaunch start: tells a restarted node from the old
  int last_epoch = -1;      ///< the last epoch this gculaunch ran ranks in; -1: none yet
  int last_restarts = -1;   ///< the restarts the job had used in that epoch
  /// This gculaunch reads its own plan (job/nodeplan/<e>/<k>, and its own admission); false:
  /// an older one, which reads the whole plan from job/plan/<e>.
  bool node_plans = false;
  bool operator==(const NodeRegistration&) const = default;
};

/// Why an epoch stopped.
struct StopMarker {
  enum class Kind {
    kRankFailed,  ///< a rank exited non-zero or died of a signal (or could not start)
    kNodeLost,    ///< a node stopped heartbeating, or node 0's store vanished
    kNodeLeft,    ///< a node's gculaunch was stopped (signal) or gave up (stuck ranks)
    kSuccess,     ///< every node's ranks exited 0
    kJobError,    ///< the job cannot run: nodes disagree, or nodes never joined
    kNodeJoined,  ///< elastic: a node arrived while the job runs below MAX; re-form, free
    kHang,        ///< node 0 found the job hung (--hang-timeout): restartable with --on-hang
                  ///< restart, else every node exits 6
    /// Node 0 ended the restart loop (--max-same-failures: the same failure, or a progress
    /// file that stopped advancing); only in an abort plan; every node exits with the
    /// failed rank's code
    kSameFailure,
  };
  Kind kind = Kind::kRankFailed;
  int epoch = 0;
  int restarts = -1;  ///< the restarts the job had used when `epoch` started; -1: = epoch
  int node = -1;      ///< the node concerned (its id, elastic); -1: none
  std::string host;
  std::string addr;
  int rank = -1;  ///< kRankFailed: global rank; -1 when unknown
  int local_rank = -1;
  int exit_code = 0;        ///< kRankFailed: the rank's shell code; kNodeLeft: the node's code;
                            ///< kJobError: the code every node exits with
  std::string what;         ///< "exit code 7", "SIGTERM", "no heartbeat for 3.0 s", ...
  bool restartable = true;  ///< whether a restart can help: false when the program could not
                            ///< start, or the node cannot come back (it gave up: stuck ranks)
  bool operator==(const StopMarker&) const = default;
};

/// One node's share of an epoch.
struct PlanNode {
  int node_rank = 0;  ///< GROUP_RANK in this epoch
  int nproc = 1;
  int rank_offset = 0;  ///< RANK of its local rank 0
  std::string host;
  std::string addr;
  int id = 0;  ///< the member it is (fixed size: = node_rank; elastic: its node id)
  bool operator==(const PlanNode&) const = default;
};

/// The coordinator's "go" for an epoch (or why it will never run).
struct JobPlan {
  int epoch = 0;
  int restarts = -1;  ///< restarts used so far: TORCHELASTIC_RESTART_COUNT; -1: = epoch
  int world_size = 0;
  /// MASTER_PORT for the ranks; 0: the one the nodes meet on (the agent store).
  int ranks_port = 0;
  std::vector<PlanNode> nodes;  ///< in node-rank order; a node's own plan: its entry alone
  /// A node's own plan (PlanFor): the job's node count, as `nodes` holds only the reader's
  /// entry; 0: `nodes` is the whole list.
  int nnodes = 0;
  std::string leader_addr;  ///< a node's own plan: the address of node rank 0
  std::optional<StopMarker> abort;
  /// The back-off the job waited before this epoch (--restart-backoff); 0: none.
  double backoff_s = 0;
  bool operator==(const JobPlan&) const = default;
};

std::string Encode(const NodeRegistration& reg);
std::string Encode(const StopMarker& marker);
std::string Encode(const JobPlan& plan);
/// A node's reaped report: {"signature": "...", "progress": 1200 or null}.
std::string Encode(const AttemptReport& report);
/// Decoders check types and ranges; errors name the field ("nproc: expected a number >= 1").
Result<NodeRegistration> DecodeRegistration(std::string_view text);
Result<StopMarker> DecodeMarker(std::string_view text);
Result<JobPlan> DecodePlan(std::string_view text);
/// "1" (an older gculaunch's reaped value) is an empty report.
Result<AttemptReport> DecodeReport(std::string_view text);

/// The plan of `epoch` from every node's registration, in node-rank order: global ranks
/// are assigned in that order (rank_offset = sum of the nproc of lower nodes).
/// REQUIRES: regs holds nodes 0..n-1 exactly once each (see CheckRegistration).
JobPlan MakePlanForTest(std::vector<NodeRegistration> regs, int epoch, int ranks_port);
/// The same with the nodes in the order given (elastic: node rank = position; a node's id is
/// its registration's node_rank).
JobPlan MakeOrderedPlan(const std::vector<NodeRegistration>& regs, int epoch, int ranks_port);

/// The own plan, of a whole `plan`, of the node whose entry is `entry`: that entry alone, the
/// node count and node rank 0's address (O(1) in the nodes: the coordinator makes one per node).
/// REQUIRES: `plan` is not an abort, and `entry` is one of its nodes.
JobPlan PlanFor(const JobPlan& plan, const PlanNode& entry);
/// The nodes in the epoch, from a whole plan or a node's own.
int NodeCount(const JobPlan& plan);
/// The address of node rank 0, from a whole plan or a node's own ("" when unknown).
std::string LeaderAddr(const JobPlan& plan);

/// Whether the job `reg` belongs to takes the elastic path (--nnodes MIN:MAX with MIN < MAX, or
/// any job whose leader is elected, where MIN = MAX is a fixed size).
inline bool Elastic(const NodeRegistration& reg) {
  return reg.min_nodes > 0 && reg.min_nodes <= reg.nnodes;
}
/// The restarts used when the marker's (or plan's) epoch started: `restarts`, else the epoch
/// (a fixed-size job, where every epoch after the first is a restart).
inline int RestartsOf(const StopMarker& m) { return m.restarts >= 0 ? m.restarts : m.epoch; }
inline int RestartsOf(const JobPlan& p) { return p.restarts >= 0 ? p.restarts : p.epoch; }

/// Whether `reg` belongs to the job node 0 (`node0`) runs: the same run id.  The error
/// names both jobs and the fix.
Status CheckIdentity(const NodeRegistration& reg, const NodeRegistration& node0);
/// Whether `reg`, a member of the job, fits it: same nnodes and max restarts, node rank in
/// range.  The error names both sides and the fix.
Status CheckRegistration(const NodeRegistration& reg, const NodeRegistration& node0);

/// Whether the job re-forms after `marker` ended its epoch: a node joined (free), or a rank
/// failure that a restart can help, a node lost or a node that left, a hang with --on-hang
/// restart, while the restarts used (`marker.restarts`) are below `max_restarts`.
bool Restartable(const StopMarker& marker, int max_restarts);

/// The exit code of node `self` when the job ends with `marker` (exit_codes.h): 0 for
/// success, the failed rank's code, kNodeLost for a lost node or for a node that left (the
/// node that left itself exits with its own code), kJobError's and kSameFailure's code, kHang
/// (6) for a hang.
int ExitCodeFor(const StopMarker& marker, int self);

/// One line for logs: "rank 3 (local rank 1) on node 1 (hostb, 198.18.0.2) failed with exit
/// code 7", "node 2 (hostc, 198.18.0.3) was lost: no heartbeat for 3.0 s", ...
std::string Describe(const StopMarker& marker);
/// "node 1 (hostb, 198.18.0.2)"; without host and addr just "node 1".
std::string NodeName(int node, const std::string& host, const std::string& addr);

/// The outcome (base/outcome.h) a marker of `kind` ends the job with.
Outcome OutcomeOfKind(StopMarker::Kind kind);
/// A marker's "kind" on the wire: its outcome's name in the outcome table ("rank_failed",
/// "node_lost", "node_left", "success", "job_error", "node_joined", "hang", "same_failure").
/// These names are what every gculaunch since the first multi-node one sends and reads; a
/// kind added later is a new row of the table, and a node of an older gculaunch refuses a
/// marker of it ("unknown kind") and stops, rather than guessing (docs/multinode.md).
std::string KindName(StopMarker::Kind kind);

}  // namespace gculaunch::job
