#include "launcher/sys/health_runner.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <utility>

#include "base/text.h"
#include "launcher/sys/command_runner.h"

namespace gculaunch {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

// One child of a check: its command until it is collected, then its outcome.
struct HealthRunner::Pending {
  std::unique_ptr<RunningCommand> running;
  Clock::time_point deadline;
  double timeout_s = 0;
  bool done = false;
  HealthRun run;
};

// The wait for device memory after a teardown: its query, the child asking it now (if any),
// and what it saw so far.
struct HealthRunner::MemoryPoll {
  HealthQuery query;
  Clock::time_point began;
  Clock::time_point deadline;
  Clock::time_point next;  ///< when to ask again
  std::unique_ptr<Pending> asking;
  bool asked = false;
  bool finished = false;
  MemoryWaitReport report;
};

namespace {

Clock::duration ToDuration(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

HealthRun FromOutcome(const CommandOutcome& o, double timeout_s) {
  HealthRun run;
  run.code = o.code;
  run.out = o.out;
  run.err = o.err;
  run.timeout_s = timeout_s;
  switch (o.kind) {
    case CommandOutcome::Kind::kExited:
      run.kind = HealthRun::Kind::kExited;
      break;
    case CommandOutcome::Kind::kSignaled:
      run.kind = HealthRun::Kind::kSignaled;
      break;
    case CommandOutcome::Kind::kTimedOut:
      run.kind = HealthRun::Kind::kTimedOut;
      break;
    case CommandOutcome::Kind::kSpawnFailed:
      run.kind = HealthRun::Kind::kFailed;
      run.err = o.error;
      break;
  }
  return run;
}

}  // namespace

std::optional<HealthPlan> HealthPlanFor(const LaunchSpec& spec, const EnvMap& env) {
  if (!spec.profile.has_devices() && !spec.profile.health && spec.health_check.empty()) {
    return std::nullopt;
  }
  HealthPlan plan;
  plan.profile = spec.profile;
  plan.cards = spec.device_pool;
  plan.tool_path = spec.health_tool_path;
  plan.path_var = env.GetOr("PATH", "");
  plan.command = spec.health_check;
  plan.command_name = spec.health_check_name;
  plan.command_timeout_s = spec.health_check_timeout_s;
  plan.memory_wait_s = spec.device_memory_wait_s;
  plan.env = env;
  return plan;
}

HealthRunner::HealthRunner(asio::io_context& io, HealthPlan plan, const DeviceProbe& probe)
    : io_(io), plan_(std::move(plan)), probe_(probe), poll_(io) {
  for (const DeviceFile& d : probe_.FindDevices(plan_.profile)) device_ids_.push_back(d.id);
}

HealthRunner::~HealthRunner() { Cancel(); }

void HealthRunner::Cancel() {
  ++*generation_;
  poll_.cancel();
  done_ = nullptr;
  tool_.clear();  // a RunningCommand destroyed unfinished kills its group and reaps it
  command_.reset();
  memory_.reset();
}

std::unique_ptr<RunningCommand> HealthRunner::Spawn(const std::string& path,
                                                    const std::vector<std::string>& args,
                                                    double timeout_s, int attempt) const {
  std::vector<std::string> argv{path};
  argv.insert(argv.end(), args.begin(), args.end());
  EnvMap env = plan_.env;
  env.Set("GCULAUNCH_HEALTH_CARDS", Join(plan_.cards, ","));
  env.Set("GCULAUNCH_HEALTH_ATTEMPT", std::to_string(attempt));
  return RunningCommand::Start(argv, env, timeout_s);
}

std::unique_ptr<HealthRunner::Pending> HealthRunner::StartPending(
    const std::vector<std::string>& args, double timeout_s, int attempt) const {
  auto p = std::make_unique<Pending>();
  p->timeout_s = timeout_s;
  p->deadline = Clock::now() + ToDuration(timeout_s);
  p->running = Spawn(plan_.tool_path, args, timeout_s, attempt);
  return p;
}

void HealthRunner::StartTool(const std::vector<HealthQuery>& queries, int attempt) {
  queries_ = queries;
  tool_.clear();
  for (const HealthQuery& q : queries_) {
    tool_.push_back(StartPending(q.args, plan_.profile.health->timeout_s, attempt));
  }
}

void HealthRunner::Check(int attempt, Done done, bool reclaim) {
  Cancel();
  done_ = std::move(done);
  attempt_ = attempt;
  if (reclaim && plan_.memory_wait_s > 0 && plan_.profile.health && plan_.profile.health->memory &&
      !plan_.tool_path.empty()) {
    memory_ = std::make_unique<MemoryPoll>();
    memory_->query = HealthMemoryQuery(*plan_.profile.health);
    memory_->began = Clock::now();
    memory_->next = memory_->began;
    memory_->deadline = memory_->began + ToDuration(plan_.memory_wait_s);
    memory_->report.below_mib = plan_.profile.health->memory->below_mib;
  }
  if (plan_.profile.health && !plan_.tool_path.empty()) {
    StartTool({HealthFullQuery(*plan_.profile.health)}, attempt);
  }
  if (!plan_.command.empty()) {
    command_ = std::make_unique<Pending>();
    command_->timeout_s = plan_.command_timeout_s;
    command_->deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(plan_.command_timeout_s));
    command_->running = Spawn(plan_.command, {}, plan_.command_timeout_s, attempt);
  }
  // While the children run: the built-in rows are a directory listing and a stat.
  builtin_ = JudgeBuiltinHealth(plan_.profile, probe_, device_ids_, plan_.cards);
  Collect();
}

// Whether `p` is finished (collecting it when it just exited or its deadline passed).
bool HealthRunner::CollectDone(Pending& p) const {
  if (p.done) return true;
  if (!p.running->Exited() && Clock::now() < p.deadline) return false;
  p.run = FromOutcome(p.running->Finish(), p.timeout_s);
  p.running.reset();
  p.done = true;
  return true;
}

// The memory wait's next step: ask the tool (when due), or read its answer; true once the
// cards' memory is freed, the bound passed or the query failed.
bool HealthRunner::MemoryDone() {
  if (!memory_ || memory_->finished) return true;
  MemoryPoll& m = *memory_;
  if (!m.asking) {
    const auto now = Clock::now();
    if (now < m.next) return false;
    // A query started before the bound may run to the tool's timeout, but not much longer.
    const double left = std::chrono::duration<double>(m.deadline - now).count();
    m.asking = StartPending(
        m.query.args, std::min(plan_.profile.health->timeout_s, std::max(left, 1.0)), attempt_);
    return false;
  }
  if (!CollectDone(*m.asking)) return false;
  const auto now = Clock::now();
  auto held = JudgeHealthMemory(*plan_.profile.health, m.asking->run, plan_.cards);
  m.asking.reset();
  const bool first = !std::exchange(m.asked, true);
  if (!held.ok()) {
    m.report.failed = held.error().what;
    EndMemory(now);
    return true;
  }
  if (first && !held->empty()) {
    m.report.fired = true;
    m.report.first = *held;
  }
  if (held->empty() || now >= m.deadline) {
    m.report.held = std::move(*held);
    EndMemory(now);
    return true;
  }
  m.next = now + kMemoryPoll;
  return false;
}

void HealthRunner::EndMemory(Clock::time_point now) {
  memory_->finished = true;
  memory_->report.waited_s = std::chrono::duration<double>(now - memory_->began).count();
}

void HealthRunner::Collect() {
  bool all = MemoryDone();
  for (auto& p : tool_) all = CollectDone(*p) && all;
  if (command_) all = CollectDone(*command_) && all;
  if (!all) {
    Poll();
    return;
  }
  const HealthToolSpec* tool = plan_.profile.health ? &*plan_.profile.health : nullptr;
  if (tool != nullptr && tool_.size() == 1 && queries_.size() == 1 &&
      HealthNeedsFallback(*tool, tool_.front()->run)) {
    StartTool(HealthFieldQueries(*tool), attempt_);
    Poll();
    return;
  }
  Report();
}

void HealthRunner::Poll() {
  poll_.expires_after(kPoll);
  // The token, not `this`, is looked at first: a handler already due when the runner went
  // away still runs.
  std::weak_ptr<uint64_t> token = generation_;
  poll_.async_wait([this, token, gen = *generation_](const boost::system::error_code& ec) {
    auto live = token.lock();
    if (!ec && live && *live == gen && done_) Collect();
  });
}

void HealthRunner::Report() {
  HealthReport report;
  report.rows = builtin_;
  if (plan_.profile.health) {
    if (plan_.tool_path.empty()) {
      report.rows.push_back(HealthToolMissing(*plan_.profile.health, plan_.path_var));
    } else {
      std::vector<HealthRun> runs;
      for (const auto& p : tool_) runs.push_back(p->run);
      report.rows.push_back(JudgeHealthTool(*plan_.profile.health, queries_, runs, plan_.cards));
    }
  }
  if (command_) {
    report.rows.push_back(JudgeHealthCommand(plan_.command_name, command_->run, plan_.cards));
  }
  if (memory_) report.memory = memory_->report;
  tool_.clear();
  command_.reset();
  memory_.reset();
  Done done = std::exchange(done_, nullptr);
  // Posted, so that `done` may call Check() or destroy the runner.
  std::weak_ptr<uint64_t> token = generation_;
  asio::post(io_, [token, gen = *generation_, done = std::move(done),
                   report = std::move(report)]() mutable {
    auto live = token.lock();
    if (live && *live == gen) done(std::move(report));
  });
}

}  // namespace gculaunch
