#include "launcher/ops/hang_watch.h"

#include <algorithm>

#include "base/duration.h"
#include "launcher/ops/hang_check.h"
#include "launcher/ops/stack_report.h"
#include "launcher/sys/safe_files.h"

namespace gculaunch {

void PublishHangReport(const HangWatchConfig& config, int number, int epoch,
                       const HangVerdict& verdict, const std::vector<StackDump>& dumps,
                       const std::string& report, OutputWriter& writer, const TargetPtr& console,
                       spdlog::logger& log) {
  config.events->On(JobEvent::Hang(epoch, config.timeout_s, verdict.silent_s,
                                   OnHangName(config.on_hang), OddRanks(dumps), verdict.why));
  writer.Urgent(console, report);
  if (!config.report_dir) return;
  const std::string name = "hang_" + std::to_string(number) + ".txt";
  if (Status written = config.report_dir->WriteFile(name, report); written.ok()) {
    log.info("hang report: {}", config.report_dir->PathOf(name));
  } else {
    log.warn("cannot write the hang report: {}", written.error().what);
  }
}

HangWatch::HangWatch(boost::asio::io_context& io, Supervisor& supervisor, StackDumper& dumper,
                     OutputWriter& writer, TargetPtr console, spdlog::logger& log,
                     HangWatchConfig config)
    : supervisor_(supervisor),
      dumper_(dumper),
      writer_(writer),
      console_(std::move(console)),
      log_(log),
      config_(std::move(config)),
      // A tenth of the timeout, between 20 and 250 ms: detection within ~10 % of it.
      tick_(std::clamp(SecondsToMillis(config_.timeout_s / 10), std::chrono::milliseconds(20),
                       std::chrono::milliseconds(250))),
      timer_(io) {}

void HangWatch::Start() { Arm(); }

void HangWatch::Arm() {
  timer_.expires_after(tick_);
  timer_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec) {
    if (ec) return;
    Tick();
    Arm();
  }));
}

void HangWatch::Tick() {
  const WorkerGroup* group = supervisor_.group();
  if (group == nullptr || dumping_ || supervisor_.phase() != PolicyState::Phase::kRunning) {
    return;
  }
  if (group->restart_count() != attempt_) {
    attempt_ = group->restart_count();
    reported_ = false;
  }
  const HangVerdict verdict = CheckHang(group->Progress(), config_.timeout_s, config_.grace_s);
  if (!verdict.hang) {
    reported_ = false;  // progress resumed: a later hang is reported again
    return;
  }
  if (reported_) return;
  reported_ = true;
  dumping_ = true;
  ++hangs_;
  log_.error("hang: {}; dumping every rank's stacks", verdict.why);
  dumper_.Dump(
      group->StackTargets(),
      lifetime_.Wrap([this, attempt = attempt_, verdict](const std::vector<StackDump>& dumps) {
        OnDumped(attempt, verdict, dumps);
      }));
}

void HangWatch::OnDumped(int attempt, const HangVerdict& verdict,
                         const std::vector<StackDump>& dumps) {
  dumping_ = false;
  PublishHangReport(config_, hangs_, attempt, verdict, dumps,
                    FormatStackReport("gculaunch: hang (" + verdict.why + "): stacks of attempt " +
                                          std::to_string(attempt),
                                      dumps),
                    writer_, console_, log_);
  const WorkerGroup* group = supervisor_.group();
  if (group == nullptr || group->restart_count() != attempt) return;  // already over
  switch (config_.on_hang) {
    case OnHang::kStop:
      supervisor_.Hang(false);
      break;
    case OnHang::kRestart:
      supervisor_.Hang(true);
      break;
    case OnHang::kReport:
      log_.warn("--on-hang report: the ranks keep running");
      break;
  }
}

}  // namespace gculaunch
