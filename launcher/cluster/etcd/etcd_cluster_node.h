// EtcdClusterNode: a node's place in a job whose rendezvous is etcd (--rdzv-backend etcd;
// docs/etcd.md, "Job rendezvous on etcd"):
//
//   EtcdMember      the etcd client of this process and its lease (etcd_mirror.h)
//   EtcdSeat        the campaign for the term's leadership; the leader serves the ranks' store
//                   on MASTER_PORT and runs the term's Coordinator (etcd_seat.h)
//   EtcdAgentBoard  the board this node's NodeAgent uses (etcd_board.h)
//   NodeAgent       this node's agent (node_agent.h)
//
// Start() grants the lease, retrying with back-off (100 ms doubling to 1 s) while etcd cannot
// be reached, with a progress line every progress_period; then the seat starts campaigning and
// the agent joins.  When --rdzv-timeout passes first, or etcd refuses this node (a certificate,
// a password: waiting changes nothing), the agent's join fails with one line naming every
// endpoint (exit 4, or the refusal's own code).
//
// Every node answers stack requests on its agent board, as the built-in store's other nodes
// do; no node gathers them, and there is no job-wide hang watch (the capability row of etcd,
// launcher/frontend/rdzv_backend.cc).  Finish waits until this process may leave: its agent
// finished, and, if it leads the job, its coordinator finished and the job's keys are removed.
// Then it revokes the lease (bounded), so that the other nodes see this node gone at once
// instead of after the TTL.  Destroying the node without Finish is what a killed process does:
// its keys stay until the lease's TTL ends.
//
// Lifetime: see cluster_node.h.
// Thread safety: the io_context's thread only.
#pragma once

#include <spdlog/logger.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/error.h"
#include "base/lifetime.h"
#include "etcd/client.h"
#include "launcher/cluster/cluster_node.h"
#include "launcher/cluster/dump_exchange.h"
#include "launcher/cluster/etcd/etcd_board.h"
#include "launcher/cluster/etcd/etcd_member.h"
#include "launcher/cluster/etcd/etcd_seat.h"
#include "launcher/cluster/node_agent.h"

namespace gculaunch {

struct EtcdClusterNodeSettings {
  EtcdSeatSettings seat;
  NodeAgentSettings agent;
  EtcdIdentity identity;
  std::string key_prefix;  ///< the job's keys, "<etcd prefix>/<rdzv id>/"
  std::chrono::seconds lease_ttl{10};
  std::string local_addr;  ///< --local-addr; empty: the address that routes to etcd
  std::chrono::milliseconds rdzv_timeout{std::chrono::minutes(15)};
  std::chrono::milliseconds progress_period{10000};  ///< "waiting for etcd" lines
  std::chrono::milliseconds leave_bound{2000};       ///< for the lease's revocation
};

class EtcdClusterNode : public ClusterNode {
 public:
  /// An Error when this node's address towards etcd cannot be found (one line with the fix).
  static Result<std::unique_ptr<EtcdClusterNode>> Make(boost::asio::io_context& io,
                                                       etcd::ClientOptions options,
                                                       EtcdClusterNodeSettings settings,
                                                       RankPlanner& planner, spdlog::logger& log);
  ~EtcdClusterNode() override;
  EtcdClusterNode(const EtcdClusterNode&) = delete;
  EtcdClusterNode& operator=(const EtcdClusterNode&) = delete;

  NodeAgent& agent() { return *agent_; }
  const NodeAgent& agent() const { return *agent_; }
  JobLink* job_link() override { return agent_.get(); }
  AttemptObserver* attempt_observer() override { return nullptr; }
  void Start(JobControl& ranks) override;
  JobStacks ShareStacks(LocalStacks local) override;
  void Finish(std::chrono::steady_clock::time_point bound) override;
  void DescribeJobEnd(SummaryInput& in) const override { DescribeAgentJobEnd(*agent_, in); }

  const EtcdSeat& seat() const { return *seat_; }
  EtcdSeat& seat() { return *seat_; }
  /// Lease grants tried so far.
  int grant_attempts() const { return attempts_; }

 private:
  EtcdClusterNode(boost::asio::io_context& io, etcd::ClientOptions options,
                  EtcdClusterNodeSettings settings, std::string local_addr, RankPlanner& planner,
                  spdlog::logger& log);
  void TryGrant();
  void Granted();
  /// After a failed grant: retries after the back-off, or fails the join.
  void Retry(const Error& error);
  /// This process may leave (see above); stops the seat's campaigning once the agent finished.
  bool Done();
  /// Revokes this process's lease, running the io_context for at most leave_bound.
  void Leave();

  boost::asio::io_context& io_;
  EtcdClusterNodeSettings settings_;
  spdlog::logger& log_;
  std::string endpoints_;  ///< for messages
  std::unique_ptr<EtcdMember> member_;
  std::unique_ptr<EtcdSeat> seat_;
  std::unique_ptr<EtcdAgentBoard> board_;
  std::unique_ptr<NodeAgent> agent_;
  std::optional<DumpResponder> dump_responder_;
  boost::asio::steady_timer retry_timer_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point last_progress_;
  std::chrono::milliseconds backoff_{100};
  int attempts_ = 0;
  LifetimeGuard lifetime_;  ///< last member: expires first
};

}  // namespace gculaunch
