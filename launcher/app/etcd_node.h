// EtcdNode: this gculaunch's part of a job whose rendezvous is etcd (--rdzv-backend etcd;
// docs/etcd.md, "Job rendezvous on etcd"), assembled for Job (job.h):
//
//   EtcdMember      the etcd client of this process and its lease (launcher/cluster/etcd_mirror.h)
//   EtcdSeat        the campaign for the term's leadership; the leader serves the ranks' store
//                   on MASTER_PORT and runs the term's Coordinator (etcd_seat.h)
//   EtcdAgentBoard  the board this node's NodeAgent uses (etcd_board.h)
//
// Start() grants the lease, retrying with back-off (100 ms doubling to 1 s) while etcd cannot
// be reached, with a progress line every 10 s; then it starts the seat and calls `started`.
// When --rdzv-timeout passes first, `failed(error)` gets one line naming every endpoint.
// Done() says whether this process may leave: its agent finished, and, if it leads the job, its
// coordinator finished and the job's keys are removed.  Leave() revokes the lease (bounded), so
// that the other nodes see this node gone at once instead of after the TTL.
//
// Lifetime: the io_context and the logger outlive it.
// Thread safety: the io_context's thread only.
#pragma once

#include <spdlog/logger.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "base/error.h"
#include "base/lifetime.h"
#include "launcher/cluster/etcd_board.h"
#include "launcher/cluster/etcd_seat.h"
#include "launcher/cluster/node_agent.h"
#include "launcher/frontend/launch_spec.h"

namespace gculaunch {

struct EtcdNodeSettings {
  EtcdSeatSettings seat;
  EtcdIdentity identity;
  std::string local_addr;  ///< --local-addr; empty: the address that routes to etcd
  std::chrono::milliseconds rdzv_timeout{std::chrono::minutes(15)};
  std::chrono::milliseconds progress_period{10000};
};

class EtcdNode {
 public:
  /// An Error when the settings cannot make a client (one line with the fix).
  static Result<std::unique_ptr<EtcdNode>> Make(boost::asio::io_context& io,
                                                const EtcdSettings& etcd, EtcdNodeSettings settings,
                                                spdlog::logger& log);
  ~EtcdNode();
  EtcdNode(const EtcdNode&) = delete;
  EtcdNode& operator=(const EtcdNode&) = delete;

  AgentBoard& board() { return *board_; }
  const EtcdSeat& seat() const { return *seat_; }

  void Start(std::function<void()> started, std::function<void(Error)> failed);
  bool Done(const NodeAgent& agent);
  /// Revokes this process's lease, running `io` for at most `bound`.
  void Leave(boost::asio::io_context& io, std::chrono::milliseconds bound);

 private:
  EtcdNode(boost::asio::io_context& io, etcd::ClientOptions options, const EtcdSettings& etcd,
           EtcdNodeSettings settings, std::string local_addr, spdlog::logger& log);
  void TryGrant();

  EtcdNodeSettings settings_;
  spdlog::logger& log_;
  std::string endpoints_;  ///< for messages
  std::unique_ptr<EtcdMember> member_;
  std::unique_ptr<EtcdSeat> seat_;
  std::unique_ptr<EtcdAgentBoard> board_;
  boost::asio::steady_timer retry_timer_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point last_progress_;
  std::chrono::milliseconds backoff_{100};
  int attempts_ = 0;
  std::function<void()> on_started_;
  std::function<void(Error)> on_failed_;
  LifetimeGuard lifetime_;  ///< last member: expires first
};

}  // namespace gculaunch
