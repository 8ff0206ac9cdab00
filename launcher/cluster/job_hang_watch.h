// JobHangWatch: --hang-timeout on several nodes, node 0's executor (the decision is
// job_hang.h; the other nodes' reports come from their ProgressReporter, progress_reporter.h).
// Every `period` it reads the latest report of every other member of the epoch its ranks run
// (Coordinator::OtherMembers: node ranks, or an elastic job's drawn ids; a re-form starts a
// fresh watch), merges it with its own ranks' progress and lets CheckJobHang decide.  On a
// hang:
//   1. gathers every node's stacks (the `gather` callback: node 0's own dump and
//      DumpGatherer's, dump_exchange.h; the ranks keep running);
//   2. prints the job's report (every rank's stack, node by node, and the ranks that differ
//      from the job's majority) to gculaunch's stderr and, with log files, to
//      "<run log dir>/hang_<n>.txt" on node 0;
//   3. carries out --on-hang: stop and restart publish the epoch's stop marker of kind `hang`
//      (every node stops; restart re-forms the job for one restart of --max-restarts, else
//      every node exits 6); report does nothing more, and the next report comes only after
//      the job progressed again and stopped again.
//
// Ownership: borrows the board, the coordinator, the Supervisor and the writer, which outlive
// it; a pending callback of a destroyed watch does nothing.
// Thread safety: the io_context's thread only.
#pragma once

#include <spdlog/logger.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/lifetime.h"
#include "launcher/cluster/coordinator.h"
#include "launcher/cluster/job_board.h"
#include "launcher/cluster/job_hang.h"
#include "launcher/frontend/types.h"
#include "launcher/ops/hang_check.h"
#include "launcher/ops/hang_watch.h"
#include "launcher/ops/stack_report.h"
#include "launcher/run/job_events.h"
#include "launcher/run/output_writer.h"
#include "launcher/run/supervisor.h"

namespace gculaunch {

/// The same settings as a single node's watch (--hang-timeout, --hang-grace, --on-hang, the
/// report directory, the event hub).
using JobHangConfig = HangWatchConfig;

class JobHangWatch {
 public:
  /// Calls back with every node's part of the job's stacks (node 0's first).
  using Gather = std::function<void(std::function<void(std::vector<NodeStacks>)>)>;

  /// `coordinator`: node 0's, for the restarts the current epoch started with.  `nodes`: the
  /// job's node count (its maximum), which sets the period with the timeout.
  JobHangWatch(boost::asio::io_context& io, CoordinatorBoard& board, const Coordinator& coordinator,
               Supervisor& supervisor, Gather gather, OutputWriter& writer, TargetPtr console,
               spdlog::logger& log, JobHangConfig config, int nodes = 1);
  JobHangWatch(const JobHangWatch&) = delete;
  JobHangWatch& operator=(const JobHangWatch&) = delete;

  void Start();
  /// Hangs reported so far.
  int hangs() const { return hangs_; }

 private:
  struct Seen {
    std::string text;
    std::chrono::steady_clock::time_point at;
    std::optional<job::NodeProgress> report;  ///< `text` decoded (once, when it changed)
  };

  void Arm();
  void Tick();
  void WarnUnreported(const std::vector<int>& nodes);
  void OnGathered(int epoch, const HangVerdict& verdict, const std::vector<NodeStacks>& parts);

  CoordinatorBoard& board_;
  const Coordinator& coordinator_;
  Supervisor& supervisor_;
  Gather gather_;
  OutputWriter& writer_;
  TargetPtr console_;
  spdlog::logger& log_;
  JobHangConfig config_;
  std::chrono::milliseconds period_;
  boost::asio::steady_timer timer_;
  std::map<int, Seen> seen_;  ///< per node: its latest report and when node 0 first saw it
  int epoch_ = -1;            ///< the epoch being watched
  std::chrono::steady_clock::time_point epoch_start_{};
  bool warned_ = false;    ///< about nodes that do not report, this epoch
  bool reported_ = false;  ///< this hang was reported (report: wait for progress)
  bool gathering_ = false;
  int hangs_ = 0;
  LifetimeGuard lifetime_;  ///< last member
};

}  // namespace gculaunch
