// ClusterNodeSettings: what a node of a job is made of, from the LaunchSpec (docs/multinode.md):
// its registration, its agent's settings, the link to node 0's store and the coordinator's.
// The one place that turns the spec into the cluster layer's settings; the backend's row of
// the capability table (launcher/frontend/rdzv_backend.h) shapes them (an elected leader:
// node ranks at rendezvous, MASTER_ADDR from the plan, the leader named in messages).
//
// Thread safety: MakeClusterNodeSettings reads the host name and draws a random incarnation;
// otherwise plain values.
#pragma once

#include "launcher/cluster/agent_link.h"
#include "launcher/cluster/coordinator.h"
#include "launcher/cluster/node_agent.h"
#include "launcher/frontend/launch_spec.h"
#include "launcher/frontend/rank_env.h"

namespace gculaunch {

struct ClusterNodeSettings {
  NodeAgentSettings agent;
  RemoteLinkOptions remote;         ///< the built-in store's other nodes: node 0's store
  CoordinatorSettings coordinator;  ///< node 0's, or with an elected leader each term's
};

/// The settings for `spec`, with a fresh incarnation (the job tells a restarted node from its
/// old self by it) and this run's id.
ClusterNodeSettings MakeClusterNodeSettings(const LaunchSpec& spec, const RankRuntime& runtime);

}  // namespace gculaunch
