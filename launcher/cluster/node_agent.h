// NodeAgent: this node's part in a multi-node job (every node, node 0 included).
//
// The thin executor of job::AgentStep (agent_policy.h): it joins the job through the job board
// (job_board.h: connects to node 0's store, sends a join request, waits for its admission),
// then turns what the board says (the epoch's plan and stop marker, node 0 going away) and
// what the Supervisor reports (a local teardown, a drained attempt, its end) into events, and
// carries out the actions: start, stop or end the local ranks through the Supervisor's job
// interface, publish markers, report done/reaped, join again after a loss, say bye.  It
// decides nothing itself.
//
// Joining again (node 0 went away, or the job counted this node lost) reconnects with
// back-off, resolving MASTER_ADDR afresh on every attempt, for at most --rdzv-timeout from
// the loss; then it tells the policy (RejoinDeadline), which ends the node (exit 4, naming
// node 0).
//
// Logs: the epoch's layout when ranks start, a progress line every 10 s while the node waits
// for the others, and the policy's Log actions: every marker once ("rank 3 (local rank 1) on
// node 1 (hostb, 198.18.0.2) failed with exit code 7; every node stops (exit code 7)"), a
// loss of node 0 once per return.
//
// Lifetime: construct, Attach() the Supervisor (which was built with this object as its
// JobLink; any JobControl in tests), Start(), then run the io_context until finished().
// The board, planner and logger must outlive it.
// Thread safety: the io_context's thread only.
#pragma once

#include <spdlog/logger.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "base/lifetime.h"
#include "launcher/cluster/agent_policy.h"
#include "launcher/cluster/job_board.h"
#include "launcher/run/rank_planner.h"
#include "launcher/run/supervisor.h"

namespace gculaunch {

struct NodeAgentSettings {
  job::AgentConfig config;  ///< node rank, max restarts, the master's name
  job::NodeRegistration
      registration;         ///< what this node registers (addr: --local-addr, else filled at join)
  bool is_node0 = false;    ///< node 0: in-process board, route address via UDP
  std::string master_addr;  ///< MASTER_ADDR as given
  int agent_port = 0;       ///< the port the agents meet on
  /// MASTER_PORT for the ranks when the plan leaves it to the node (agent store: the
  /// agent port; --no-agent-store --worker-port: that port).
  std::string ranks_port;
  std::chrono::milliseconds progress_period{10000};
  /// How long a first join, or a join after node 0 went away, may wait for node 0.
  std::chrono::milliseconds rdzv_timeout{std::chrono::minutes(15)};
  JobEvents* events = NoJobEvents();  ///< rendezvous and restarts (launcher/run/job_events.h)
};

class NodeAgent : public JobLink {
 public:
  NodeAgent(boost::asio::io_context& io, AgentBoard& board, RankPlanner& planner,
            NodeAgentSettings settings, spdlog::logger& log);
  ~NodeAgent() override;
  NodeAgent(const NodeAgent&) = delete;
  NodeAgent& operator=(const NodeAgent&) = delete;

  void Attach(JobControl& ranks) { supervisor_ = &ranks; }
  /// Joins the job (asynchronously).  REQUIRES: Attach() was called.
  void Start();

  /// Bye said (or impossible): gculaunch may exit with exit_code().
  bool finished() const { return finished_; }
  int exit_code() const { return state_.exit_code; }
  /// The marker (or abort) that ended the job for this node, once known.
  const std::optional<job::StopMarker>& outcome() const { return outcome_; }
  /// Why joining failed (master unreachable), if it did.
  const std::optional<Error>& join_error() const { return join_error_; }
  const job::AgentState& state() const { return state_; }
  /// Ends this node before it joined: the job's store (or its backend) could not be reached.  Logs
  /// `error`, keeps it as join_error() and exits the ranks' job with `code`.
  void JoinFailed(Error error, int code);

  // ---- JobLink ----
  void LocalStop(const LocalStopReport& report) override;
  void AttemptDrained(bool success, const AttemptReport& report) override;
  void Finished(int exit_code) override;
  void Unhealthy(const std::string& what) override;

 private:
  /// The address to publish: --local-addr when given, else `found`.
  std::string Advertised(const std::string& found) const;
  void Join();
  void SendJoin(const std::string& addr);
  void SendJoinRequest();
  void SendRegistration();
  void LogElasticLayout(const job::JobPlan& plan, const job::PlanNode& mine);
  void Refused(const Error& why);
  void Admitted(Result<std::string> text);
  void Dispatch(const job::AgentEvent& event);
  void Execute(const job::AgentAction& action);
  void StartRanks(const job::AgentAction& action);
  void WaitPlan(int epoch);
  void WatchMarker(int epoch);
  void Log(const job::AgentAction& action);
  void ArmProgress();
  /// Wraps a board callback: it is dropped when the agent is gone or joined again since.
  template <typename F>
  auto Current(F f);

  AgentBoard& board_;
  RankPlanner& planner_;
  NodeAgentSettings settings_;
  spdlog::logger& log_;
  JobControl* supervisor_ = nullptr;  ///< this node's ranks (the Supervisor)
  job::AgentState state_;
  std::optional<job::StopMarker> outcome_;
  AttemptReport drained_;  ///< how the last drained attempt failed here, for the reaped report
  std::optional<Error> join_error_;
  boost::asio::steady_timer progress_timer_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point stop_seen_{};  ///< when the last marker arrived
  /// While joining again: when node 0 (or this node's place in the job) was lost.
  std::optional<std::chrono::steady_clock::time_point> lost_since_;
  /// Node 0 writes this node's own plan (job/nodeplan/<e>/<k>); false: only the whole one (an
  /// older gculaunch).  Learnt from each admission.
  bool own_plans_ = false;
  int joins_ = 0;  ///< join attempts so far (a generation for the board's callbacks)
  int seq_ = 0;    ///< the join request the coordinator admitted (0: none yet)
  bool connected_ = false;
  bool finished_ = false;
  bool bye_pending_ = false;
  std::string unhealthy_;  ///< the health gate's line: this node leaves as unhealthy
  /// Callbacks of the board may outlive the agent.  Last member: expires first.
  LifetimeGuard lifetime_;
};

}  // namespace gculaunch
