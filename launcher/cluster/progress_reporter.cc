#include "launcher/cluster/progress_reporter.h"

#include "launcher/cluster/job_hang.h"

namespace gculaunch {

ProgressReporter::ProgressReporter(boost::asio::io_context& io, AgentBoard& board,
                                   const Supervisor& supervisor, int node, double timeout_s,
                                   int nodes)
    : board_(board),
      supervisor_(supervisor),
      node_(node),
      timeout_s_(timeout_s),
      period_(job::HangCheckPeriod(timeout_s, nodes)),
      timer_(io) {}

void ProgressReporter::Start() { Arm(); }

void ProgressReporter::Arm() {
  timer_.expires_after(period_);
  timer_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec) {
    if (ec) return;
    Report();
    Arm();
  }));
}

void ProgressReporter::Report() {
  const WorkerGroup* group = supervisor_.group();
  if (busy_ || group == nullptr || supervisor_.phase() != PolicyState::Phase::kRunning) return;
  job::NodeProgress report;
  report.node = node_;
  report.epoch = group->restart_count();
  report.seq = ++seq_;
  report.timeout_s = timeout_s_;
  report.ranks = group->Progress();
  busy_ = true;
  // A failed write means node 0 is gone: the agent hears of it through its own requests.
  board_.PublishProgress(job::Encode(report),
                         lifetime_.Wrap([this](const Status&) { busy_ = false; }));
}

}  // namespace gculaunch
