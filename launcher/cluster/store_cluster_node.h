// StoreClusterNode: a node's place in a job whose rendezvous is gculaunch's built-in store
// (docs/multinode.md).  Node 0 hosts the agent store: its agent reaches the store in this
// process (LocalAgentLink), and it runs the job's Coordinator on a StoreCoordinatorBoard that
// the store's connection hooks feed.  Every other node reaches node 0's store over TCP
// (RemoteAgentLink).  Either way this node's NodeAgent uses a StoreAgentBoard.
//
// Node 0 gathers the job's stacks and decides hangs for the job; the other nodes answer its
// stack requests and report their ranks' progress.  Finish keeps node 0's store up until every
// node said bye or was lost (they heartbeat until then).
//
// Lifetime: see cluster_node.h; members are declared in construction order and destroyed in
// reverse, the links last.
// Thread safety: the io_context's thread only.
#pragma once

#include <optional>

#include "launcher/cluster/agent_link.h"
#include "launcher/cluster/cluster_node.h"
#include "launcher/cluster/cluster_settings.h"
#include "launcher/cluster/coordinator.h"
#include "launcher/cluster/dump_exchange.h"
#include "launcher/cluster/job_hang_watch.h"
#include "launcher/cluster/node_agent.h"
#include "launcher/cluster/progress_reporter.h"
#include "launcher/cluster/store_board.h"

namespace gculaunch {

class StoreClusterNode : public ClusterNode {
 public:
  /// Node 0 when `context.store` is set (this node hosts the store), another node otherwise.
  StoreClusterNode(const LaunchSpec& spec, const ClusterNodeSettings& settings,
                   const ClusterNodeContext& context);
  StoreClusterNode(const StoreClusterNode&) = delete;
  StoreClusterNode& operator=(const StoreClusterNode&) = delete;

  JobLink* job_link() override { return &*agent_; }
  AttemptObserver* attempt_observer() override { return nullptr; }
  void Start(JobControl& ranks) override;
  JobStacks ShareStacks(LocalStacks local) override;
  void WatchHangs(Supervisor& supervisor, JobStacks stacks, const HangWatchDeps& deps,
                  const HangWatchConfig& config) override;
  void Finish(std::chrono::steady_clock::time_point bound) override;
  void DescribeJobEnd(SummaryInput& in) const override { DescribeAgentJobEnd(*agent_, in); }

 private:
  boost::asio::io_context& io_;
  ConnectionHooks* hooks_;
  spdlog::logger& log_;
  int node_rank_;
  int nnodes_;                                  ///< the job's node count (elastic: its maximum)
  std::optional<LocalAgentLink> local_link_;    ///< node 0: the store is in this process
  std::optional<RemoteAgentLink> remote_link_;  ///< other nodes: node 0's store over TCP
  std::optional<StoreAgentBoard> agent_board_;
  std::optional<StoreCoordinatorBoard> coordinator_board_;  ///< node 0 only
  std::optional<NodeAgent> agent_;
  std::optional<Coordinator> coordinator_;       ///< node 0 only
  std::optional<DumpGatherer> dump_gatherer_;    ///< node 0: `gculaunch stacks` for the job
  std::optional<DumpResponder> dump_responder_;  ///< other nodes: answer node 0's requests
  std::optional<JobHangWatch> job_hang_;         ///< node 0: decides for the job
  std::optional<ProgressReporter> progress_;     ///< other nodes: report to node 0
};

}  // namespace gculaunch
