// SingleNode: the ClusterNode of a launch that is no node of a job of several nodes
// (!RunsAsCluster): nothing to join, nobody to tell.  Its Supervisor decides restarts itself
// and switches the key space of the store this node hosts (the AgentStore, if any, is its
// attempt observer); `gculaunch stacks` shows this node's ranks; --hang-timeout is this
// node's HangWatch (launcher/ops/hang_watch.h).
//
// Lifetime: see cluster_node.h; the hang watch is destroyed in Finish, before the Supervisor.
// Thread safety: the io_context's thread only.
#pragma once

#include <optional>

#include "launcher/cluster/cluster_node.h"
#include "launcher/ops/hang_watch.h"

namespace gculaunch {

class SingleNode : public ClusterNode {
 public:
  explicit SingleNode(const ClusterNodeContext& context);
  SingleNode(const SingleNode&) = delete;
  SingleNode& operator=(const SingleNode&) = delete;

  JobLink* job_link() override { return nullptr; }
  AttemptObserver* attempt_observer() override;
  void Start(JobControl& ranks) override;
  JobStacks ShareStacks(LocalStacks local) override;
  void WatchHangs(Supervisor& supervisor, JobStacks stacks, const HangWatchDeps& deps,
                  const HangWatchConfig& config) override;
  void Finish(std::chrono::steady_clock::time_point bound) override;
  void DescribeJobEnd(SummaryInput& in) const override;

 private:
  boost::asio::io_context& io_;
  AgentStore* store_;
  spdlog::logger& log_;
  std::optional<HangWatch> hang_;
};

}  // namespace gculaunch
