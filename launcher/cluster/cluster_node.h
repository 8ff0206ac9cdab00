// ClusterNode: this gculaunch's place in the job, whichever rendezvous backend keeps it, and a
// single node's trivial one.  A launch (launcher/app/launch.h) talks to this interface alone;
// it never asks which kind it has, or whether there are other nodes.
//
//   SingleNode        one node (single_node.h): its Supervisor decides its restarts and
//                     switches the store's key space itself; its hang watch is the node's own
//   StoreClusterNode  the built-in store (store_cluster_node.h): node 0 hosts the agent store,
//                     its coordinator and the board on it; the other nodes reach it over TCP
//   a backend's node  each other rendezvous backend's, in its folder (rdzv_backends.h)
//
// MakeClusterNode picks one from the LaunchSpec: SingleNode unless RunsAsCluster, else the
// backend's, through the backends' table (rdzv_backends.h).  What a launch does with it, in
// this order:
//   1. job_link(),      given to the Supervisor: its agent (the node decides restarts with the
//      attempt_observer()  job), or the store whose key space it switches (a single node)
//   2. Start(ranks)     a node of a job: the agent gets the ranks and joins the job (node 0's
//                       coordinator starts)
//   3. ShareStacks      `gculaunch stacks`: the node that coordinates gathers every node's
//                       stacks, the others answer its requests (dump_exchange.h)
//   4. WatchHangs       --hang-timeout: a single node's HangWatch, or across nodes the
//                       coordinating node decides for the job (JobHangWatch) and the others
//                       report their ranks' progress to it
//   5. Finish           after the ranks' last attempt: the hang watch stops; a node of a job
//                       waits (bounded) until every node said bye, leaves the job, and stops
//                       answering stack requests
//   6. DescribeJobEnd   the job-wide part of the exit summary
//
// Lifetime: the objects in ClusterNodeContext outlive the ClusterNode; the Supervisor and the
// stack dumper given to steps 3 and 4 live until Finish returns.
// Thread safety: the io_context's thread only.
#pragma once

#include <spdlog/logger.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "base/error.h"
#include "launcher/frontend/launch_spec.h"
#include "launcher/frontend/rank_env.h"
#include "launcher/ops/hang_watch.h"
#include "launcher/ops/stack_dumper.h"
#include "launcher/ops/stack_report.h"
#include "launcher/run/job_events.h"
#include "launcher/run/output_writer.h"
#include "launcher/run/rank_planner.h"
#include "launcher/run/supervisor.h"

namespace gculaunch::rendezvous {
class Proxy;
}  // namespace gculaunch::rendezvous

namespace gculaunch {

class AgentStore;        // launcher/run/agent_store.h
class NodeAgent;         // node_agent.h
struct ConnectionHooks;  // store_board.h
struct SummaryInput;     // launcher/run/exit_summary.h

/// What a ClusterNode borrows from the launch's event loop.
struct ClusterNodeContext {
  boost::asio::io_context& io;
  RankPlanner& planner;
  AgentStore* store = nullptr;  ///< the agent store, when this node hosts it
  /// --store-proxy, on a node that proxies the store: this node's proxy, which carries the
  /// agent's connections to node 0 too (RemoteLinkOptions::proxy).
  rendezvous::Proxy* proxy = nullptr;
  /// The store's connection hooks (MakeConnectionHooks); node 0's board becomes their target
  /// until Finish.
  ConnectionHooks* hooks = nullptr;
  JobEvents* events = NoJobEvents();
  spdlog::logger& log;
};

/// What a hang watch borrows: the stack dumper of this node's ranks, and the console (through
/// the launch's writer) its reports go to.
struct HangWatchDeps {
  StackDumper& dumper;
  OutputWriter& writer;
  TargetPtr console;
};

class ClusterNode {
 public:
  /// Dumps this node's ranks and calls back with its part.
  using LocalStacks = std::function<void(std::function<void(NodeStacks)> done)>;
  /// Calls back with the job's stacks, this node's first.
  using JobStacks = std::function<void(std::function<void(std::vector<NodeStacks>)> done)>;

  virtual ~ClusterNode() = default;

  /// The Supervisor's JobLink (see step 1); null on a single node.
  virtual JobLink* job_link() = 0;
  /// The Supervisor's AttemptObserver (see step 1); null on a node of a job, whose
  /// coordinator switches the store's key space.
  virtual AttemptObserver* attempt_observer() = 0;
  /// Hands `ranks` (the Supervisor; any JobControl in tests) to the agent and joins the job.
  virtual void Start(JobControl& ranks) = 0;
  /// The job's stacks built on this node's `local` ones (see step 3 above).
  virtual JobStacks ShareStacks(LocalStacks local) = 0;
  /// Starts this node's part of the hang watch (see step 4 above).  A backend without the
  /// hang_watch capability (rdzv_backend.h) keeps this default, which does nothing: the front
  /// end refuses --hang-timeout for it, so it is never called.
  virtual void WatchHangs(Supervisor& supervisor, JobStacks stacks, const HangWatchDeps& deps,
                          const HangWatchConfig& config);
  /// Ends this node's part (see step 5 above), running the io_context at most until `bound`
  /// or a teardown signal.
  virtual void Finish(std::chrono::steady_clock::time_point bound) = 0;
  /// The job-wide part of the exit summary: why the job ended, as every node tells it
  /// (nothing on a single node).
  virtual void DescribeJobEnd(SummaryInput& in) const = 0;

 protected:
  /// Runs `io` until `finished()`, `bound`, or SIGINT/SIGTERM/SIGQUIT: the Supervisor no
  /// longer listens, so a teardown signal ends the wait at once.
  static void WaitUntil(boost::asio::io_context& io, std::chrono::steady_clock::time_point bound,
                        const std::function<bool()>& finished);
  /// The job's stacks where this node gathers no other node's: its own part alone.
  static JobStacks OwnStacksOnly(LocalStacks local);
  /// DescribeJobEnd of a node whose NodeAgent took part in the job.
  static void DescribeAgentJobEnd(const NodeAgent& agent, SummaryInput& in);
};

/// The store's connection hooks for `spec`, made before the store (which the board they feed
/// needs): a job on the built-in store's node 0 has them; null otherwise.
std::shared_ptr<ConnectionHooks> MakeConnectionHooks(const LaunchSpec& spec);

/// This node's ClusterNode for `spec`: a SingleNode unless RunsAsCluster(spec), else its
/// backend's (rdzv_backends.h).  An Error, with its fix, when the backend's settings cannot
/// make a client or this node's address towards the backend cannot be found.
Result<std::unique_ptr<ClusterNode>> MakeClusterNode(const LaunchSpec& spec,
                                                     const RankRuntime& runtime,
                                                     const ClusterNodeContext& context);

}  // namespace gculaunch
