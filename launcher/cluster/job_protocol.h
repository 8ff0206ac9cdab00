// The node agents' protocol: the keys they use in the master's store and the messages those
// keys hold, as pure values with a JSON codec.  No I/O; docs/multinode.md tells the story.
//
// All keys live in the store's launcher namespace.  In-process users on the master name
// them as below; socket clients (the other nodes) put "gculaunch/" in front (KeyForSocket).
//
//   job/node/<k>        NodeRegistration of node k, written once (COMPARE_SET from "": a
//                       second node claiming rank k reads the first one's registration)
//   job/plan/<e>        JobPlan of epoch e, written by the coordinator: the "go" for every
//                       node; or an abort (JobPlan::abort) when epoch e will never run
//   job/stop/<e>        StopMarker of epoch e, first writer wins (COMPARE_SET from ""):
//                       a rank failed, a node was lost or left, or every node finished
//   job/done/<e>/<k>    node k's ranks of epoch e all exited 0 and were reaped
//   job/reaped/<e>/<k>  node k's ranks of epoch e were stopped and reaped (after a marker)
//   job/hb/<k>          heartbeat counter of node k (ADD 1 per beat), k > 0
//   job/bye/<k>         node k is leaving; the value is its exit code
//   job/missing         the coordinator's latest "still missing" text, for the others' logs
//
// Epoch e is TORCHELASTIC_RESTART_COUNT of the ranks it runs.  An epoch's marker decides
// what follows (Restartable): the next epoch, or the end of the job on every node with the
// exit code ExitCodeFor() gives.
//
// Thread safety: pure functions over values.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace gculaunch::job {

// ---- keys ----
std::string NodeKey(int node);
std::string PlanKey(int epoch);
std::string StopKey(int epoch);
std::string DoneKey(int epoch, int node);
std::string ReapedKey(int epoch, int node);
std::string HeartbeatKey(int node);
std::string ByeKey(int node);
inline constexpr const char* kMissingKey = "job/missing";
/// The key as a socket client names it ("gculaunch/" + key).
std::string KeyForSocket(const std::string& key);

// ---- messages ----

/// What a node tells the job when it arrives.
struct NodeRegistration {
  int node_rank = 0;
  int nnodes = 1;
  int nproc = 1;         ///< ranks on this node
  int max_restarts = 0;  ///< must agree job-wide
  std::string run_id;    ///< must agree job-wide
  std::string host;      ///< gethostname(), for messages only
  std::string addr;      ///< numeric address that routes to the master (net_address.h)
  int pid = 0;           ///< the node's gculaunch, for messages
  bool operator==(const NodeRegistration&) const = default;
};

/// Why an epoch stopped.
struct StopMarker {
  enum class Kind {
    kRankFailed,  ///< a rank exited non-zero or died of a signal (or could not start)
    kNodeLost,    ///< a node stopped heartbeating, or the master's store vanished
    kNodeLeft,    ///< a node's gculaunch was stopped (signal) or gave up (stuck ranks)
    kSuccess,     ///< every node's ranks exited 0
    kJobError,    ///< the job cannot run: nodes disagree, or nodes never joined
  };
  Kind kind = Kind::kRankFailed;
  int epoch = 0;
  int node = -1;  ///< the node concerned; -1: none
  std::string host;
  std::string addr;
  int rank = -1;  ///< kRankFailed: global rank; -1 when unknown
  int local_rank = -1;
  int exit_code = 0;        ///< kRankFailed: the rank's shell code; kNodeLeft: the node's code;
                            ///< kJobError: the code every node exits with
  std::string what;         ///< "exit code 7", "SIGTERM", "no heartbeat for 3.0 s", ...
  bool restartable = true;  ///< kRankFailed only: false when the program could not start
  bool operator==(const StopMarker&) const = default;
};

/// One node's share of an epoch.
struct PlanNode {
  int node_rank = 0;
  int nproc = 1;
  int rank_offset = 0;  ///< RANK of its local rank 0
  std::string host;
  std::string addr;
  bool operator==(const PlanNode&) const = default;
};

/// The coordinator's "go" for an epoch (or why it will never run).
struct JobPlan {
  int epoch = 0;
  int world_size = 0;
  /// MASTER_PORT for the ranks; 0: the one the nodes meet on (the agent store).
  int ranks_port = 0;
  std::vector<PlanNode> nodes;  ///< in node-rank order
  std::optional<StopMarker> abort;
  bool operator==(const JobPlan&) const = default;
};

std::string Encode(const NodeRegistration& reg);
std::string Encode(const StopMarker& marker);
std::string Encode(const JobPlan& plan);
/// Decoders check types and ranges; errors name the field ("nproc: expected a number >= 1").
Result<NodeRegistration> DecodeRegistration(std::string_view text);
Result<StopMarker> DecodeMarker(std::string_view text);
Result<JobPlan> DecodePlan(std::string_view text);

/// The plan of `epoch` from every node's registration, in node-rank order: global ranks
/// are assigned in that order (rank_offset = sum of the nproc of lower nodes).
/// REQUIRES: regs holds nodes 0..n-1 exactly once each (see CheckRegistration).
JobPlan MakePlan(std::vector<NodeRegistration> regs, int epoch, int ranks_port);

/// Whether `reg` may join the job that node 0 (`master`) defines: same nnodes, run id and
/// max restarts, node rank in range.  The error names both sides and the fix.
Status CheckRegistration(const NodeRegistration& reg, const NodeRegistration& master);

/// Whether the job restarts after `marker` ended epoch `epoch`.
bool Restartable(const StopMarker& marker, int max_restarts);

/// The exit code of node `self` when the job ends with `marker` (exit_codes.h): 0 for
/// success, the failed rank's code, kNodeLost for a lost node or for a node that left (the
/// node that left itself exits with its own code), kJobError's code.
int ExitCodeFor(const StopMarker& marker, int self);

/// One line for logs: "rank 3 (local rank 1) on node 1 (hostb, 198.18.0.2) failed with exit
/// code 7", "node 2 (hostc, 198.18.0.3) was lost: no heartbeat for 3.0 s", ...
std::string Describe(const StopMarker& marker);
/// "node 1 (hostb, 198.18.0.2)"; without host and addr just "node 1".
std::string NodeName(int node, const std::string& host, const std::string& addr);

/// "outcome" names for --summary-json: "success", "rank_failed", "node_lost", "node_left",
/// "job_error".
std::string KindName(StopMarker::Kind kind);

}  // namespace gculaunch::job
