// EtcdSeat: this process's campaign for the leadership of a job on etcd, and what the leader
// runs (docs/etcd.md, "Job rendezvous on etcd").
//
// Every process of the job runs one next to its NodeAgent (on an EtcdAgentBoard).  The seat
// campaigns with a create-only transaction: P/leader must be missing and P/term unchanged
// since it was read; the winner writes P/leader (on its lease) and P/term = t + 1.  The
// winner's term is t + 1 and its guard is the leader key's create_revision.  The winner then
//   - serves the ranks' store (an AgentStore on `ranks_host`:`ranks_port`; 0 = any port),
//   - runs an EtcdCoordinatorBoard of its term and a Coordinator on it (a new leader's
//     coordinator adopts the job: the other nodes join again, reporting their last epoch),
// and tears them down when it is deposed (a guarded write refused, or its leader key gone).
// The others watch P/leader and campaign again when it is deleted.
//
// When the leader's coordinator finished (every node said bye or is away), the leader deletes
// every key of the job (P...) in one guarded transaction: finished() becomes true.  A seat
// that sees P/term vanish after it has seen a term does not campaign again (the job is over).
//
// Lifetime: `member` and `log` outlive the seat.  Destroying the seat without Stop() is what
// a killed process does: its leader key stays until the lease's TTL ends.
// Thread safety: the io_context's thread only.
#pragma once

#include <spdlog/logger.h>

#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <optional>
#include <string>

#include "launcher/cluster/coordinator.h"
#include "launcher/cluster/etcd/etcd_board.h"
#include "launcher/run/agent_store.h"

namespace gculaunch {

struct EtcdSeatSettings {
  /// The coordinator a leader runs.  config.node0: this node's registration (the seat makes
  /// it node 0); ranks_port is set to the ranks' store's port.
  CoordinatorSettings coordinator;
  std::string ranks_host = "0.0.0.0";  ///< where the ranks' store listens
  std::uint16_t ranks_port = 0;        ///< its port; 0: any free port
  /// How often the leader looks whether its coordinator finished.
  std::chrono::milliseconds finish_check{100};
};

class EtcdSeat {
 public:
  EtcdSeat(EtcdMember& member, EtcdSeatSettings settings, spdlog::logger& log);
  ~EtcdSeat();
  EtcdSeat(const EtcdSeat&) = delete;
  EtcdSeat& operator=(const EtcdSeat&) = delete;

  /// Starts campaigning (after member.Start()).
  void Start();
  /// Campaigns no more (this node's agent is finished); a leader keeps leading until its
  /// coordinator finished.
  void Stop() { stopped_ = true; }

  /// This seat won its term and was not deposed (its coordinator may still be starting).
  bool leader() const { return guard_ != 0; }
  /// The term this seat leads or led last (0: none).
  int term() const { return term_; }
  /// The job is over: this leader removed its keys, or they were removed.
  bool finished() const { return finished_; }
  /// After Stop(): the process may exit (it does not lead, or it removed the job's keys).
  bool idle() const { return stopped_ && (!leader() || finished_); }
  const Coordinator* coordinator() const { return coordinator_.get(); }
  EtcdCoordinatorBoard* board() { return board_.get(); }
  /// The ranks' store while leading (null otherwise).
  AgentStore* ranks_store() { return store_.get(); }

 private:
  void WatchLeaderKey();
  void Watched();
  void Campaign();
  void Won(int term, std::int64_t guard);
  void Depose(const std::string& what);
  void ArmFinishCheck();
  void Finish();

  EtcdMember& member_;
  EtcdSeatSettings settings_;
  spdlog::logger& log_;
  EtcdMirror leader_key_;  ///< P/leader
  std::unique_ptr<AgentStore> store_;
  std::unique_ptr<EtcdCoordinatorBoard> board_;
  std::unique_ptr<Coordinator> coordinator_;
  int term_ = 0;
  int seen_term_ = 0;  ///< the highest term read from P/term
  std::int64_t guard_ = 0;
  int lease_listener_ = 0;
  bool campaigning_ = false;  ///< a campaign transaction is in flight
  bool stopped_ = false;
  bool finishing_ = false;  ///< removing the job's keys
  bool finished_ = false;
  boost::asio::steady_timer timer_;        ///< the finish check
  boost::asio::steady_timer retry_timer_;  ///< a campaign that could not run
  LifetimeGuard lifetime_;                 ///< last member: expires first
};

}  // namespace gculaunch
