// ClusterNode: this gculaunch's place in a job of several nodes, whichever backend keeps the
// job's rendezvous.  A launch (launcher/app/launch.h) talks to this interface alone; it never
// asks which backend it has.
//
//   StoreClusterNode  the built-in store (store_cluster_node.h): node 0 hosts the agent store,
//                     its coordinator and the board on it; the other nodes reach it over TCP
//   EtcdClusterNode   --rdzv-backend etcd (etcd_cluster_node.h): every node holds a lease and
//                     campaigns; the term's leader serves the ranks' store and coordinates
//
// MakeClusterNode picks one from the LaunchSpec.  Every node has a NodeAgent (node_agent.h),
// the Supervisor's JobLink.  What a launch does with a ClusterNode, in this order:
//   1. agent()        given to the Supervisor as its JobLink
//   2. Start(ranks)   the agent gets the ranks and joins the job (node 0's coordinator starts)
//   3. ShareStacks    `gculaunch stacks` for the job: the node that coordinates gathers every
//                     node's stacks, the others answer its requests (dump_exchange.h)
//   4. WatchHangs     --hang-timeout across nodes: the coordinating node decides for the job
//                     (JobHangWatch), the others report their ranks' progress to it
//   5. Finish         after the ranks' last attempt: the hang watch stops, this node waits
//                     (bounded) until every node said bye, leaves the job, and stops
//                     answering stack requests
//   6. DescribeJobEnd the job-wide part of the exit summary, from the agent
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
#include <optional>
#include <vector>

#include "base/error.h"
#include "launcher/cluster/agent_link.h"
#include "launcher/cluster/coordinator.h"
#include "launcher/cluster/dump_exchange.h"
#include "launcher/cluster/job_hang_watch.h"
#include "launcher/cluster/node_agent.h"
#include "launcher/cluster/progress_reporter.h"
#include "launcher/cluster/store_board.h"
#include "launcher/frontend/launch_spec.h"
#include "launcher/frontend/rank_env.h"
#include "launcher/ops/hang_watch.h"
#include "launcher/ops/stack_report.h"
#include "launcher/run/agent_store.h"
#include "launcher/run/exit_summary.h"
#include "launcher/run/job_events.h"
#include "launcher/run/output_writer.h"
#include "launcher/run/rank_planner.h"
#include "launcher/run/supervisor.h"

namespace gculaunch {

/// Whether the spec's job has several nodes (or may have: elastic, etcd): a ClusterNode and a
/// NodeAgent that decides restarts.
bool RunsAsCluster(const LaunchSpec& spec);

/// A job whose node ranks are assigned at rendezvous (elastic, or c10d without node ranks) on
/// the built-in store decides here which node hosts the store, as torchrun's c10d rendezvous
/// does: the node the rendezvous endpoint names (it becomes node 0, the others node 1 until
/// the coordinator numbers them).  The layout line says which, and by which rule
/// (MatchThisHost).  nullopt: the spec decided already (node ranks given, etcd, --rdzv-conf
/// is_host).
std::optional<LaunchSpec> DecideStoreHost(const LaunchSpec& spec);

/// `spec` (store host inferred) as a client of the store another launcher on this host
/// serves: torchrun's retry when the endpoint's port is taken.  `why` goes in the layout line.
LaunchSpec JoinAsClient(const LaunchSpec& spec, const std::string& why);

/// What the multi-node pieces are made of, from the spec (docs/multinode.md).
struct ClusterNodeSettings {
  NodeAgentSettings agent;
  RemoteLinkOptions remote;         ///< the built-in store's other nodes: node 0's store
  CoordinatorSettings coordinator;  ///< node 0's, or on etcd each term's leader's
};

/// The settings for `spec`, with a fresh incarnation (the job tells a restarted node from its
/// old self by it) and this run's id.
ClusterNodeSettings MakeClusterNodeSettings(const LaunchSpec& spec, const RankRuntime& runtime);

/// What a ClusterNode borrows from the launch's event loop.
struct ClusterNodeContext {
  boost::asio::io_context& io;
  RankPlanner& planner;
  AgentStore* store = nullptr;  ///< the agent store, when this node hosts it
  /// The store's connection hooks; node 0's board becomes their target until Finish.
  ConnectionHooks* hooks = nullptr;
  JobEvents* events = NoJobEvents();
  spdlog::logger& log;
};

/// Where a node's hang watch writes (the console, through the launch's writer).
struct HangOutput {
  OutputWriter& writer;
  TargetPtr console;
};

class ClusterNode {
 public:
  /// Dumps this node's ranks and calls back with its part.
  using LocalStacks = DumpResponder::LocalDump;
  /// Calls back with the job's stacks, this node's first.
  using JobStacks = JobHangWatch::Gather;

  virtual ~ClusterNode() = default;

  virtual NodeAgent& agent() = 0;
  virtual const NodeAgent& agent() const = 0;
  /// Hands `ranks` (the Supervisor; any JobControl in tests) to the agent and joins the job.
  virtual void Start(JobControl& ranks) = 0;
  /// The job's stacks built on this node's `local` ones (see step 3 above).
  virtual JobStacks ShareStacks(LocalStacks local) = 0;
  /// Starts this node's part of the job's hang watch (see step 4 above).
  virtual void WatchHangs(Supervisor& supervisor, JobStacks stacks, const HangOutput& output,
                          const HangWatchConfig& config) = 0;
  /// Ends this node's part (see step 5 above), running the io_context at most until `bound`
  /// or a teardown signal.
  virtual void Finish(std::chrono::steady_clock::time_point bound) = 0;

 protected:
  /// Runs `io` until `finished()`, `bound`, or SIGINT/SIGTERM/SIGQUIT: the Supervisor no
  /// longer listens, so a teardown signal ends the wait at once.
  static void WaitUntil(boost::asio::io_context& io, std::chrono::steady_clock::time_point bound,
                        const std::function<bool()>& finished);
};

/// The job-wide part of the exit summary: why the job ended, as every node tells it.
void DescribeJobEnd(const NodeAgent& agent, SummaryInput& in);

/// This node's ClusterNode for `spec` (RunsAsCluster): on etcd an EtcdClusterNode, else a
/// StoreClusterNode.  An Error, with its fix, when etcd's settings cannot make a client or this
/// node's address towards etcd cannot be found.
Result<std::unique_ptr<ClusterNode>> MakeClusterNode(const LaunchSpec& spec,
                                                     const RankRuntime& runtime,
                                                     const ClusterNodeContext& context);

}  // namespace gculaunch
