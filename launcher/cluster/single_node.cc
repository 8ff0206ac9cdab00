#include "launcher/cluster/single_node.h"

#include <utility>

#include "launcher/run/agent_store.h"

namespace gculaunch {

SingleNode::SingleNode(const ClusterNodeContext& context)
    : io_(context.io), store_(context.store), log_(context.log) {}

AttemptObserver* SingleNode::attempt_observer() { return store_; }

void SingleNode::Start(JobControl& /*ranks*/) {}

ClusterNode::JobStacks SingleNode::ShareStacks(LocalStacks local) {
  return OwnStacksOnly(std::move(local));
}

// The stacks come from this node's dumper directly: the watch signals only this node's ranks.
void SingleNode::WatchHangs(Supervisor& supervisor, JobStacks /*stacks*/, const HangWatchDeps& deps,
                            const HangWatchConfig& config) {
  hang_.emplace(io_, supervisor, deps.dumper, deps.writer, deps.console, log_, config);
  hang_->Start();
}

void SingleNode::Finish(std::chrono::steady_clock::time_point /*bound*/) { hang_.reset(); }

void SingleNode::DescribeJobEnd(SummaryInput& /*in*/) const {}

}  // namespace gculaunch
