// HangWatch: --hang-timeout's executor.  Every `tick` it asks the current attempt's ranks
// how long ago each showed progress (WorkerGroup::Progress), lets CheckHang (hang_check.h)
// decide, and on a hang:
//   1. dumps every rank's stacks (StackDumper; the ranks keep running meanwhile);
//   2. prints the report (stack_report.h: every rank's stack, the ranks that differ from the
//      majority, the ranks whose heartbeat stopped) to gculaunch's stderr and, with log
//      files, to "<run log dir>/hang_<n>.txt";
//   3. carries out --on-hang: stop (Supervisor::Hang, exit 6), restart (Supervisor::Hang
//      with restart: counts against --max-restarts, exit 6 when none is left), or report
//      (nothing more; the next report comes only after progress resumed and stopped again).
// Only a running attempt is watched; a new attempt starts with a clean slate (its own
// start-up grace).
//
// Single node only: on several nodes node 0 decides for the job (launcher/cluster/
// hang_exchange.h) and the other nodes only report their progress.
//
// Ownership: borrows everything; must be destroyed before the Supervisor and the dumper.
// Thread safety: io_context thread only.
#pragma once

#include <spdlog/logger.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "base/lifetime.h"
#include "launcher/frontend/types.h"
#include "launcher/ops/hang_check.h"
#include "launcher/ops/stack_dumper.h"
#include "launcher/run/job_events.h"
#include "launcher/run/output_writer.h"
#include "launcher/run/supervisor.h"
#include "launcher/sys/held_dir.h"

namespace gculaunch {

struct HangWatchConfig {
  double timeout_s = 0;  ///< --hang-timeout
  double grace_s = 600;  ///< --hang-grace (>= timeout_s)
  OnHang on_hang = OnHang::kStop;
  std::optional<sys::HeldDir> report_dir;  ///< where hang_<n>.txt goes; none: console only
  JobEvents* events = NoJobEvents();  ///< hears a `hang` event per hang (launcher/run/job_events.h)
};

/// What a single node's HangWatch and node 0's JobHangWatch (launcher/cluster/job_hang_watch.h)
/// both do once a hang's stacks are in: the `hang` event (of `epoch`, with the odd ranks of
/// `dumps`), `report` on the console and in <report_dir>/hang_<number>.txt.
void PublishHangReport(const HangWatchConfig& config, int number, int epoch,
                       const HangVerdict& verdict, const std::vector<StackDump>& dumps,
                       const std::string& report, OutputWriter& writer, const TargetPtr& console,
                       spdlog::logger& log);

class HangWatch {
 public:
  HangWatch(boost::asio::io_context& io, Supervisor& supervisor, StackDumper& dumper,
            OutputWriter& writer, TargetPtr console, spdlog::logger& log, HangWatchConfig config);
  HangWatch(const HangWatch&) = delete;
  HangWatch& operator=(const HangWatch&) = delete;

  /// Starts watching (call before Supervisor::Run).
  void Start();
  /// Hangs reported so far.
  int hangs() const { return hangs_; }

 private:
  void Arm();
  void Tick();
  void OnDumped(int attempt, const HangVerdict& verdict, const std::vector<StackDump>& dumps);

  Supervisor& supervisor_;
  StackDumper& dumper_;
  OutputWriter& writer_;
  TargetPtr console_;
  spdlog::logger& log_;
  HangWatchConfig config_;
  std::chrono::milliseconds tick_;
  boost::asio::steady_timer timer_;
  int attempt_ = -1;       ///< the attempt being watched
  bool reported_ = false;  ///< this hang was reported (report: wait for progress)
  bool dumping_ = false;
  int hangs_ = 0;
  LifetimeGuard lifetime_;  ///< last member
};

}  // namespace gculaunch
