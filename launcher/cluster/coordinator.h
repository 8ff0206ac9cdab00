// Coordinator: the job-wide half of a multi-node job, run by node 0's gculaunch next to the
// store it hosts.
//
// The thin executor of job::CoordinatorStep (job_policy.h).  Its inputs are the store's own
// keys, read in-process (rendezvous::Server::AsyncWait never polls): registrations, done /
// reaped reports, the epochs' stop markers and the nodes' byes; plus three timers:
//   every `missing_period` (10 s)  which nodes are still missing, logged and published as
//                                  job/missing for the other nodes' progress lines
//   `rdzv_timeout`                 nodes that never joined end the job (exit code 3)
//   every `heartbeat_check`        a node whose job/hb/<k> did not change for
//                                  `heartbeat_timeout` is lost
// and the store's connection hooks (ConnectionHooks): a node's heartbeat names its control
// connection, and that connection ending without a bye (its gculaunch was killed) makes the
// node lost at once instead of after the heartbeat timeout.
// Its outputs: plans, markers, and BeginAttempt on the store's key space for the ranks,
// which happens only after every node reported its ranks of the old epoch reaped.
//
// Lifetime: Start(), then run the io_context until finished() (every node said bye or was
// lost); the store must stay up until then.  `server`, `attempts` and `log` outlive it.
// Thread safety: the io_context's thread only.
#pragma once

#include <spdlog/logger.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "base/lifetime.h"
#include "launcher/cluster/job_policy.h"
#include "launcher/run/supervisor.h"
#include "rendezvous/server.h"

namespace gculaunch {

struct CoordinatorSettings {
  job::CoordinatorConfig config;
  std::chrono::milliseconds rdzv_timeout{std::chrono::minutes(15)};
  std::chrono::milliseconds missing_period{10000};
  std::chrono::milliseconds heartbeat_check{250};
  std::chrono::milliseconds heartbeat_timeout{3000};
  /// MASTER_PORT of the ranks, published in each plan: 0 = the agent store's port (the ranks
  /// use gculaunch's store); >0 a fixed port (--no-agent-store --worker-port); -1 = a port
  /// that is free on this node, chosen per epoch (--no-agent-store: rank 0 binds it).
  int ranks_port = 0;
};

class Coordinator;

/// The store's hooks for the Coordinator.  The store is built before the Coordinator (which
/// needs the store), so the hooks forward to whatever `target` is set to later.
struct ConnectionHooks {
  Coordinator* target = nullptr;
  /// Server options whose observers forward to `hooks->target`.
  static rendezvous::ServerOptions Options(const std::shared_ptr<ConnectionHooks>& hooks);
};

class Coordinator {
 public:
  Coordinator(boost::asio::io_context& io, rendezvous::Server& server, AttemptObserver& attempts,
              CoordinatorSettings settings, spdlog::logger& log);
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  void Start();
  /// From the store's observers (ConnectionHooks).
  void OnRequest(rendezvous::ConnId id, const rendezvous::Request& request);
  void OnConnectionEnd(rendezvous::ConnId id);
  bool finished() const { return state_.phase == job::CoordinatorState::Phase::kDone; }
  const job::CoordinatorState& state() const { return state_; }

 private:
  void Dispatch(const job::CoordinatorEvent& event);
  void Execute(const job::CoordinatorAction& action);
  void WatchEpoch(int epoch);
  void ArmMissing();
  void ArmHeartbeatCheck();
  void CheckHeartbeats();

  struct Beat {
    std::string value;
    std::chrono::steady_clock::time_point changed;
  };

  rendezvous::Server& server_;
  AttemptObserver& attempts_;
  CoordinatorSettings settings_;
  spdlog::logger& log_;
  job::CoordinatorState state_;
  std::map<int, Beat> beats_;
  std::map<rendezvous::ConnId, int> control_conns_;  ///< a node's heartbeating connection
  boost::asio::steady_timer missing_timer_;
  boost::asio::steady_timer deadline_timer_;
  boost::asio::steady_timer heartbeat_timer_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point last_check_{};  ///< of the heartbeats
  std::chrono::steady_clock::time_point stopped_{};     ///< when the last marker was read
  LifetimeGuard lifetime_;                              ///< last member: expires first
};

}  // namespace gculaunch
