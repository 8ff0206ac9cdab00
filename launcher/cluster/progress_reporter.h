// ProgressReporter: --hang-timeout on several nodes, every node's part other than node 0's
// (docs/multinode.md, "Hangs").  Every HangCheckPeriod (job_hang.h), while its ranks run, it
// publishes their progress (WorkerGroup::Progress) as job/progress/<k> through the agent board,
// for node 0's JobHangWatch (job_hang_watch.h) to decide on.  It decides nothing.
//
// Ownership: borrows the board and the Supervisor, which outlive it; a pending callback of a
// destroyed reporter does nothing.
// Thread safety: the io_context's thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>

#include "base/lifetime.h"
#include "launcher/cluster/job_board.h"
#include "launcher/run/supervisor.h"

namespace gculaunch {

class ProgressReporter {
 public:
  /// `nodes`: the job's node count (its maximum), which sets the period with the timeout.
  ProgressReporter(boost::asio::io_context& io, AgentBoard& board, const Supervisor& supervisor,
                   int node, double timeout_s, int nodes = 1);
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;

  void Start();

 private:
  void Arm();
  void Report();

  AgentBoard& board_;
  const Supervisor& supervisor_;
  int node_;
  double timeout_s_;
  std::chrono::milliseconds period_;
  boost::asio::steady_timer timer_;
  long long seq_ = 0;
  bool busy_ = false;       ///< a report is on its way: never queue a second
  LifetimeGuard lifetime_;  ///< last member
};

}  // namespace gculaunch
