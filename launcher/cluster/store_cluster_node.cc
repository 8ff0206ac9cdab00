#include "launcher/cluster/store_cluster_node.h"

#include <utility>

#include "launcher/cluster/rdzv_backends.h"
#include "launcher/run/agent_store.h"

namespace gculaunch {

ClusterNodeMade MakeStoreClusterNode(const LaunchSpec& spec, const ClusterNodeSettings& settings,
                                     const ClusterNodeContext& context) {
  return std::unique_ptr<ClusterNode>(std::make_unique<StoreClusterNode>(spec, settings, context));
}

StoreClusterNode::StoreClusterNode(const LaunchSpec& spec, const ClusterNodeSettings& settings,
                                   const ClusterNodeContext& context)
    : io_(context.io),
      hooks_(context.hooks),
      log_(context.log),
      node_rank_(spec.node_rank),
      nnodes_(spec.nnodes) {
  AgentLink* link = nullptr;
  if (context.store != nullptr) {
    local_link_.emplace(io_, context.store->server());
    link = &*local_link_;
    coordinator_board_.emplace(
        context.store->server(), *context.store,
        spec.node_rank_at_rendezvous() ? StoreCoordinatorBoard::kAnyNode : spec.nnodes);
    if (hooks_ != nullptr) hooks_->target = &*coordinator_board_;
    coordinator_.emplace(io_, *coordinator_board_, settings.coordinator, log_);
  } else {
    RemoteLinkOptions remote = settings.remote;
    remote.proxy = context.proxy;
    remote_link_.emplace(io_, std::move(remote), log_);
    link = &*remote_link_;
  }
  agent_board_.emplace(*link, remote_link_ ? &*remote_link_ : nullptr, spec.node_rank);
  agent_.emplace(io_, *agent_board_, context.planner, settings.agent, log_);
}

void StoreClusterNode::Start(JobControl& ranks) {
  agent_->Attach(ranks);
  if (coordinator_) coordinator_->Start();
  agent_->Start();
}

// Node 0 gathers every member's stacks of the current epoch through the job board, with a
// bound; the other nodes answer node 0's requests while they run.
ClusterNode::JobStacks StoreClusterNode::ShareStacks(LocalStacks local) {
  if (!coordinator_board_) {
    dump_responder_.emplace(io_, *agent_board_, local);
    dump_responder_->Start();
    return OwnStacksOnly(std::move(local));
  }
  dump_gatherer_.emplace(io_, *coordinator_board_);
  DumpGatherer* gatherer = &*dump_gatherer_;
  const Coordinator* coordinator = &*coordinator_;
  return [local, gatherer, coordinator](std::function<void(std::vector<NodeStacks>)> done) {
    local([gatherer, coordinator, done = std::move(done)](NodeStacks own) {
      // The current epoch's members: an elastic job's nodes are keyed by their drawn ids.
      gatherer->Gather(coordinator->OtherMembers(), std::chrono::seconds(20),
                       [own = std::move(own), done](std::vector<NodeStacks> parts) {
                         parts.insert(parts.begin(), own);
                         done(std::move(parts));
                       });
    });
  };
}

void StoreClusterNode::WatchHangs(Supervisor& supervisor, JobStacks stacks,
                                  const HangWatchDeps& deps, const HangWatchConfig& config) {
  if (coordinator_board_) {
    job_hang_.emplace(io_, *coordinator_board_, *coordinator_, supervisor, std::move(stacks),
                      deps.writer, deps.console, log_, config, nnodes_);
    job_hang_->Start();
    return;
  }
  progress_.emplace(io_, *agent_board_, supervisor, node_rank_, config.timeout_s, nnodes_);
  progress_->Start();
}

// The agent says bye; node 0 keeps the store up until every node said bye or was lost, with a
// bound for a node stuck in its teardown.
void StoreClusterNode::Finish(std::chrono::steady_clock::time_point bound) {
  job_hang_.reset();
  progress_.reset();
  // Before the job formed (node 0 still gathering joins) nothing of it runs anywhere: the nodes
  // that joined wait for a node 0 at the same address, as after node 0's bye, so a signal there
  // ends this node at once instead of after the bye bound.
  const auto nobody_waits = [this] {
    return !coordinator_ || coordinator_->finished() ||
           coordinator_->state().phase == job::CoordinatorState::Phase::kGathering;
  };
  WaitUntil(io_, bound, [this, &nobody_waits] { return agent_->finished() && nobody_waits(); });
  if (!nobody_waits()) {
    log_.warn("stopping the store although not every node said bye");
  }
  if (hooks_ != nullptr) hooks_->target = nullptr;
  dump_responder_.reset();
  dump_gatherer_.reset();
}

}  // namespace gculaunch
