#include "launcher/cluster/job_hang_watch.h"

#include <algorithm>

#include "base/duration.h"
#include "launcher/cluster/coordinator_policy.h"
#include "launcher/cluster/job_hang.h"

namespace gculaunch {

using Clock = std::chrono::steady_clock;

JobHangWatch::JobHangWatch(boost::asio::io_context& io, CoordinatorBoard& board,
                           const Coordinator& coordinator, Supervisor& supervisor, Gather gather,
                           OutputWriter& writer, TargetPtr console, spdlog::logger& log,
                           JobHangConfig config, int nodes)
    : board_(board),
      coordinator_(coordinator),
      supervisor_(supervisor),
      gather_(std::move(gather)),
      writer_(writer),
      console_(std::move(console)),
      log_(log),
      config_(std::move(config)),
      period_(job::HangCheckPeriod(config_.timeout_s, nodes)),
      timer_(io) {}

void JobHangWatch::Start() { Arm(); }

void JobHangWatch::Arm() {
  timer_.expires_after(period_);
  timer_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec) {
    if (ec) return;
    Tick();
    Arm();
  }));
}

void JobHangWatch::Tick() {
  const WorkerGroup* group = supervisor_.group();
  if (group == nullptr || gathering_ || supervisor_.phase() != PolicyState::Phase::kRunning) {
    return;
  }
  const auto now = Clock::now();
  if (group->restart_count() != epoch_) {
    epoch_ = group->restart_count();
    epoch_start_ = now;
    reported_ = false;
    warned_ = false;
  }
  // The members of the epoch being watched (an elastic job's change from one to the next).
  if (coordinator_.state().epoch != epoch_) return;
  std::vector<job::SeenProgress> others;
  for (const int node : coordinator_.OtherMembers()) {
    job::SeenProgress seen;
    seen.node = node;
    if (auto text = board_.ProgressReport(node)) {
      auto it = seen_.find(node);
      if (it == seen_.end() || it->second.text != *text) {
        // Decoded once per new report, not on every tick: at 16k nodes a tick would decode
        // 16k JSON documents.
        auto report = job::DecodeProgress(*text);
        Seen fresh{std::move(*text), now, std::nullopt};
        if (report.ok()) fresh.report = std::move(*report);
        it = seen_.insert_or_assign(node, std::move(fresh)).first;
      }
      if (it->second.report) {
        seen.report = it->second.report;
        seen.seen_age_s = std::chrono::duration<double>(now - it->second.at).count();
      }
    }
    others.push_back(std::move(seen));
  }
  const job::JobHangCheck check =
      job::CheckJobHang(epoch_, group->Progress(), others, config_.timeout_s, config_.grace_s);
  if (!check.unreported.empty()) {
    // A node's ranks are still starting; one that never reports runs without --hang-timeout.
    if (!warned_ && now - epoch_start_ > std::chrono::seconds(10)) WarnUnreported(check.unreported);
    return;
  }
  if (!check.verdict.hang) {
    reported_ = false;  // progress resumed: a later hang is reported again
    return;
  }
  if (reported_) return;
  reported_ = true;
  gathering_ = true;
  ++hangs_;
  log_.error("hang: {}; gathering every node's stacks", check.verdict.why);
  gather_(lifetime_.Wrap(
      [this, epoch = epoch_, verdict = check.verdict](const std::vector<NodeStacks>& parts) {
        OnGathered(epoch, verdict, parts);
      }));
}

void JobHangWatch::WarnUnreported(const std::vector<int>& nodes) {
  warned_ = true;
  log_.warn(
      "--hang-timeout: node{} {} sent no progress report for epoch {} in 10 s; no hang is "
      "decided until every node reports (fix: give every node the same --hang-timeout)",
      nodes.size() == 1 ? "" : "s", job::JoinNodes(nodes), epoch_);
}

void JobHangWatch::OnGathered(int epoch, const HangVerdict& verdict,
                              const std::vector<NodeStacks>& parts) {
  gathering_ = false;
  const std::string& why = verdict.why;
  std::vector<StackDump> all;
  for (const NodeStacks& part : parts) all.insert(all.end(), part.dumps.begin(), part.dumps.end());
  PublishHangReport(config_, hangs_, epoch, verdict, all,
                    "gculaunch: hang (" + why + "): stacks of epoch " + std::to_string(epoch) +
                        ", every node\ngculaunch: " + FormatJobStackReport(parts),
                    writer_, console_, log_);
  const WorkerGroup* group = supervisor_.group();
  if (group == nullptr || group->restart_count() != epoch ||
      supervisor_.phase() != PolicyState::Phase::kRunning) {
    return;  // the epoch ended meanwhile
  }
  if (config_.on_hang == OnHang::kReport) {
    log_.warn("--on-hang report: the ranks keep running");
    return;
  }
  // First writer wins: a marker already written for this epoch stays.
  const job::CoordinatorState& job = coordinator_.state();
  const int restarts = job.epoch == epoch ? job.restarts : -1;
  board_.PublishMarker(epoch, job::Encode(job::HangMarker(epoch, restarts, why, parts,
                                                          config_.on_hang == OnHang::kRestart)));
}

}  // namespace gculaunch
