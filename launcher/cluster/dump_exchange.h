// DumpExchange: the whole job's stacks on node 0, through the job board (job_board.h).
//
//   DumpGatherer   node 0: RequestDump() on the board (job/dumpreq, ADD 1: request n), then
//                  polls every node's answer (job/dump/<n>/<k>) every 100 ms until each named
//                  node answered or the bound passed; a node that did not answer is named.
//                  Then it deletes the request's answer keys; an answer that comes after the
//                  bound is deleted when the next request starts.
//   DumpResponder  every other node, while it runs: polls the latest request number every
//                  `poll` (the agent link's one blocking WAIT is taken by plans and markers),
//                  and for each new request dumps its own ranks (the LocalDump callback) and
//                  publishes the answer.  Its first successful read answers the latest
//                  request too: node 0 may ask before this node's first read succeeds (its
//                  link was still connecting), and an answer to a request node 0 no longer
//                  waits for is harmless.
//
// An answer is a node's NodeStacks as JSON (stack_report.h); node 0 formats the job's report
// with FormatJobStackReport, so the ranks that differ from the majority are the whole job's.
//
// Lifetime: both own a timer and a LifetimeGuard; a pending callback of a destroyed object
// does nothing.  The board outlives them.
// Thread safety: the io_context's thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "base/lifetime.h"
#include "launcher/cluster/job_board.h"
#include "launcher/ops/stack_report.h"

namespace gculaunch {

class DumpGatherer {
 public:
  using Done = std::function<void(std::vector<NodeStacks>)>;

  DumpGatherer(boost::asio::io_context& io, CoordinatorBoard& board);
  DumpGatherer(const DumpGatherer&) = delete;
  DumpGatherer& operator=(const DumpGatherer&) = delete;

  /// Asks every node and calls `done` with one NodeStacks per node of `nodes` (in that
  /// order): its answer, or `missing` set ("no answer within 20 s").
  void Gather(const std::vector<int>& nodes, std::chrono::milliseconds bound, Done done);

 private:
  struct Request;
  void Check(const std::shared_ptr<Request>& request);
  void Forget(int request, const std::vector<int>& nodes);

  boost::asio::io_context& io_;
  CoordinatorBoard& board_;
  int last_request_ = 0;         ///< the latest request finished (0: none)
  std::vector<int> last_nodes_;  ///< the nodes it asked
  LifetimeGuard lifetime_;       ///< last member
};

class DumpResponder {
 public:
  /// Dumps this node's ranks and calls back with its part (title and dumps).
  using LocalDump = std::function<void(std::function<void(NodeStacks)> done)>;

  DumpResponder(boost::asio::io_context& io, AgentBoard& board, LocalDump dump,
                std::chrono::milliseconds poll = std::chrono::milliseconds(500));
  DumpResponder(const DumpResponder&) = delete;
  DumpResponder& operator=(const DumpResponder&) = delete;

  void Start();
  /// The requests answered so far.
  int answered() const { return answered_; }

 private:
  void Arm();
  void Poll();
  void Answer(int request);

  AgentBoard& board_;
  LocalDump dump_;
  std::chrono::milliseconds poll_;
  boost::asio::steady_timer timer_;
  int last_ = 0;  ///< the latest request answered (0: none)
  bool busy_ = false;
  int answered_ = 0;
  LifetimeGuard lifetime_;  ///< last member
};

}  // namespace gculaunch
