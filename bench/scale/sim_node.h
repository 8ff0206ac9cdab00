// SimNode: one simulated node of a multi-node job for the scale harness: the cluster part of
// a real `gculaunch --node-rank K` (MakeClusterNode: NodeAgent, StoreAgentBoard and
// RemoteAgentLink to node 0's store, built from the same LaunchSpec and RankPlanner), whose
// ranks are SimRanks (sim_rank.h) instead of processes.  It is the agent's JobControl, in
// place of the Supervisor: JobStart plans the attempt with the node's RankPlanner (the
// environment a real rank would get) and starts one SimRank per local rank from it.
//
// Where a rank's store traffic goes is the node's RankRoute: by default MASTER_ADDR and
// MASTER_PORT of the rank's environment (node 0's store).  A per-node store proxy (issue 47)
// is switched in by giving each node a route to its own proxy.
//
// What the harness does to a node: FailRank (its local rank 0 exits 1: the job restarts),
// Kill (its gculaunch dies: ranks and connections gone at once), Rejoin (a new gculaunch on
// the node: a new incarnation joins again).
//
// Lifetime: the SimJobHooks and the logger outlive every SimNode; a node's posted callbacks
// check that its cluster part still exists.  Thread safety: the io_context's thread only.
#pragma once

#include <spdlog/logger.h>

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/env_map.h"
#include "bench/scale/sim_rank.h"
#include "launcher/cluster/cluster_node.h"
#include "launcher/frontend/launch_spec.h"
#include "launcher/run/rank_planner.h"

namespace gculaunch::rendezvous {
class Proxy;
}  // namespace gculaunch::rendezvous

namespace gculaunch::bench {

/// What the nodes of one harness process report (aggregated by the caller).
class SimJobHooks {
 public:
  virtual ~SimJobHooks() = default;
  /// The node started its ranks: their global ranks (RANK) and WORLD_SIZE, as planned.
  virtual void NodeStarted(int node, int epoch, double t, const std::vector<int>& ranks,
                           int world_size) = 0;
  virtual void RankPassed(int node, int epoch, double t) = 0;  ///< the barrier
  virtual void RankHasUid(int node, int epoch, double t) = 0;  ///< the unique id
  virtual void RankFailed(int node, const std::string& what) = 0;
  virtual void NodeExited(int node, int code) = 0;
};

/// Where node `node`'s rank connects: the store's numeric address and port.
struct RankRoute {
  std::function<std::pair<std::string, std::uint16_t>(int node, const std::string& master_addr,
                                                      std::uint16_t master_port)>
      target;
  /// The source address of the node's rank connections ("" : any).
  std::function<std::string(int node)> source;
  /// The node's store proxy, which carries its agent's connections too (null: none).
  std::function<rendezvous::Proxy*(int node)> proxy;
};

/// The default route: MASTER_ADDR:MASTER_PORT, from 127.64.0.0 + node (one source address per
/// node, so the job's connections spread over many 127.x.y.z).
RankRoute DirectRoute();

class SimNode : public JobControl {
 public:
  /// `spec` is what `gculaunch --node-rank K ...` made; `scratch` a directory for the rank
  /// planner's files (created).
  SimNode(boost::asio::io_context& io, LaunchSpec spec, std::string scratch, const RankRoute& route,
          rendezvous::Dialect dialect, SimJobHooks& hooks, spdlog::logger& log);
  ~SimNode() override;
  SimNode(const SimNode&) = delete;
  SimNode& operator=(const SimNode&) = delete;

  /// Joins the job (a new gculaunch start on this node, with a fresh incarnation).
  void Start();
  /// Local rank 0 exits with code 1.
  void FailRank();
  /// This node's gculaunch is SIGKILLed: its ranks and connections are gone.
  void Kill();
  int node() const { return spec_.node_rank; }
  bool alive() const { return cluster_ != nullptr; }

  // ---- JobControl (the agent calls these) ----
  void JobStart(int restart_count) override;
  void JobStop() override;
  void JobExit(int exit_code) override;

 private:
  void StopRanks();

  boost::asio::io_context& io_;
  LaunchSpec spec_;
  std::string scratch_;
  const RankRoute& route_;
  rendezvous::Dialect dialect_;
  SimJobHooks& hooks_;
  spdlog::logger& log_;
  EnvMap base_;  ///< the node's environment: empty (the ranks need only gculaunch's variables)
  std::unique_ptr<RankPlanner> planner_;
  std::unique_ptr<ClusterNode> cluster_;
  std::vector<std::shared_ptr<SimRank>> ranks_;
  bool running_ = false;
  int incarnation_ = 0;  ///< bumped by Kill: callbacks of an older one do nothing
};

}  // namespace gculaunch::bench
