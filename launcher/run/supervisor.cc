#include "launcher/run/supervisor.h"

#include <signal.h>

#include <boost/asio/post.hpp>
#include <optional>
#include <utility>

#include "base/duration.h"
#include "base/exit_codes.h"
#include "base/text.h"
#include "launcher/run/failure_signature.h"
#include "launcher/sys/process_setup.h"

namespace gculaunch {

namespace asio = boost::asio;
using Phase = PolicyState::Phase;

namespace {}  // namespace

Supervisor::Supervisor(WorkerGroupDeps deps, spdlog::logger& log, const SupervisorConfig& config,
                       AttemptPlanner& planner, AttemptObserver* observer, JobLink* job)
    : deps_(std::move(deps)),
      log_(log),
      config_(config),
      planner_(planner),
      observer_(observer),
      job_(config.policy.agent_decides ? job : nullptr),
      state_(InitialState(config.policy)),
      signals_(deps_.io),
      grace_timer_(deps_.io),
      kill_timer_(deps_.io),
      drain_timer_(deps_.io),
      output_timer_(deps_.io),
      backoff_timer_(deps_.io) {
  if (!config_.progress_file.empty()) {
    progress_ = std::make_unique<ProgressFile>(deps_.io, config_.progress_file);
  }
}

Supervisor::~Supervisor() = default;

JobOutcome Supervisor::Run() {
  for (int sig : {SIGINT, SIGTERM, SIGQUIT, SIGUSR1, SIGUSR2}) signals_.add(sig);
  if (config_.catch_hup) signals_.add(SIGHUP);
  for (int sig : config_.extra_stop_signals) {
    if (sig != SIGUSR1 && sig != SIGUSR2) signals_.add(sig);
  }
  ArmSignals();
  // Held since the launch began (sys::HoldStopSignals): one that came meanwhile is handled now.
  sys::ReleaseStopSignals();
  outcome_.start_time = UnixNow();
  if (!config_.policy.agent_decides) {
    GateThenStart(0, false);
  } else if (deps_.standbys != nullptr) {
    // Job mode: the job sends JobStart(0) after the rendezvous; the standbys import while
    // this node waits for it (first start, a node that rejoins, an elastic newcomer).
    auto plan = planner_.PlanAttempt(0);
    if (plan.ok()) deps_.standbys->Prepare(*plan);
  }
  deps_.io.restart();
  while (!finished_) {
    if (deps_.io.run_one() == 0) break;
  }
  outcome_.end_time = UnixNow();
  return outcome_;
}

void Supervisor::StartAttempt(int restart_count) {
  ++generation_;
  scan_error_logged_ = false;
  describing_ = false;
  report_ = AttemptReport{};
  CancelTimers();
  output_timer_armed_ = false;
  if (group_) {
    auto records = group_->Records();
    // Only the last attempt's error files reach the summary: an earlier one's text (up to
    // 1 MiB per rank) is not kept for every restart.
    for (RankRecord& r : records) r.error_text.reset();
    outcome_.records.insert(outcome_.records.end(), records.begin(), records.end());
    group_.reset();
  }
  outcome_.restarts = restart_count;
  attempt_began_ = std::chrono::steady_clock::now();
  if (observer_ != nullptr) observer_->BeginAttempt(restart_count);

  group_ = std::make_unique<WorkerGroup>(
      deps_, restart_count,
      lifetime_.Wrap([this](int local_rank, WorkerExit exit) { OnRankExit(local_rank, exit); }),
      lifetime_.Wrap([this] { ScheduleDrainCheck(); }), GroupHooks(restart_count));

  auto plan = planner_.PlanAttempt(restart_count);
  if (!plan.ok()) {
    const Error& e = plan.error();
    log_.error("the ranks could not be prepared: {}{}", e.what,
               e.hint.empty() ? "" : " (fix: " + e.hint + ")");
    outcome_.start_error = plan.error();
    Dispatch(PolicyEvent::SpawnFailed(-1));
    return;
  }
  int failed_local_rank = -1;
  const auto spawn_begin = std::chrono::steady_clock::now();
  auto started = group_->Start(*plan, &failed_local_rank);
  if (log_.should_log(spdlog::level::debug)) {
    using Ms = std::chrono::duration<double, std::milli>;
    const auto now = std::chrono::steady_clock::now();
    log_.debug("attempt {}: {} rank(s) spawned in {:.1f} ms ({:.1f} ms after gculaunch started)",
               restart_count, group_->size() - group_->waiting(), Ms(now - spawn_begin).count(),
               Ms(now - config_.launcher_start).count());
  }
  PrepareStandbys(restart_count, started.ok() ? &*plan : nullptr);
  if (!started.ok()) StartFailed(failed_local_rank, started.error());
}

// What the attempt's WorkerGroup reports besides exits: each rank's process once it is final
// (a standby confirms its go later than a cold rank spawns), the warm ones in one line once
// none waits any more, and a cold start after a standby that failed.
WorkerGroup::Hooks Supervisor::GroupHooks(int restart_count) {
  WorkerGroup::Hooks hooks;
  hooks.on_started = lifetime_.Wrap([this, restart_count](const RankRecord& r) {
    config_.events->On(JobEvent::RankStart(restart_count, r.rank, r.local_rank, r.pid));
  });
  hooks.on_settled = lifetime_.Wrap([this, restart_count] {
    std::vector<int> warm;
    for (const RankRecord& r : group_->Records()) {
      if (r.warm) warm.push_back(r.local_rank);
    }
    if (warm.empty()) return;
    log_.info("attempt {}: local rank{} {} started warm (--warm-ranks)", restart_count,
              warm.size() == 1 ? "" : "s", JoinInts(warm, ","));
    log_.debug("attempt {}: the slowest standby confirmed its go {:.1f} ms after it was sent",
               restart_count, group_->slowest_go_ms());
  });
  hooks.on_start_failed = lifetime_.Wrap(
      [this](int local_rank, const Error& error) { StartFailed(local_rank, error); });
  return hooks;
}

void Supervisor::StartFailed(int local_rank, const Error& error) {
  log_.error("local rank {} could not be started: {}{}", local_rank, error.what,
             error.hint.empty() ? "" : " (fix: " + error.hint + ")");
  outcome_.start_error = error;
  outcome_.start_error_local_rank = local_rank;
  Dispatch(PolicyEvent::SpawnFailed(local_rank));
}

// --warm-ranks: the next attempt's standbys start once this one's ranks run, while a restart
// is left; none are kept otherwise.
void Supervisor::PrepareStandbys(int restart_count, const std::vector<RankLaunch>* plan) {
  StandbyPool* pool = deps_.standbys;
  if (pool == nullptr) return;
  if (plan == nullptr || restart_count >= config_.policy.max_restarts) {
    pool->DismissAll();
    return;
  }
  pool->Prepare(*plan, restart_count);
}

void Supervisor::JobStart(int restart_count) {
  if (finished_) return;
  if (config_.health == nullptr || state_.phase != Phase::kWaitingForJob) {
    Dispatch(PolicyEvent::JobStart(restart_count));
    return;
  }
  GateThenStart(restart_count, true);
}

// ---- the health gate ----

// Starts attempt `restart_count` once the gate passed: at once without a gate; else when the
// check (begun here, or during the back-off) answers.  Job mode: the gate holds back the
// job's JobStart, so the policy still waits for the job meanwhile.
void Supervisor::GateThenStart(int restart_count, bool job_start) {
  if (config_.health == nullptr) {
    StartAttempt(restart_count);
    return;
  }
  gate_waiting_ = true;
  gate_job_start_ = job_start;
  gate_job_stop_ = false;
  if (gate_attempt_ != restart_count || (!gate_report_ && !config_.health->busy())) {
    BeginGate(restart_count);
  } else if (gate_report_) {
    PassGate();
  }
}

void Supervisor::BeginGate(int restart_count) {
  if (config_.health == nullptr) return;
  gate_attempt_ = restart_count;
  gate_report_.reset();
  gate_began_ = std::chrono::steady_clock::now();
  // An attempt ran here before: its cards' memory must be freed first (where the profile
  // reads it).
  const bool reclaim = group_ != nullptr;
  config_.health->Check(restart_count, lifetime_.Wrap([this, restart_count](HealthReport report) {
    GateDone(restart_count, std::move(report));
  }),
                        reclaim);
}

void Supervisor::GateDone(int restart_count, HealthReport report) {
  if (finished_ || restart_count != gate_attempt_) return;
  using Ms = std::chrono::duration<double, std::milli>;
  log_.debug("attempt {}: health checks took {:.1f} ms", restart_count,
             Ms(std::chrono::steady_clock::now() - gate_began_).count());
  gate_report_ = std::move(report);
  if (gate_waiting_) PassGate();
}

void Supervisor::PassGate() {
  const int restart_count = gate_attempt_;
  HealthReport report = std::move(*gate_report_);
  gate_report_.reset();
  gate_attempt_ = -1;
  gate_waiting_ = false;
  if (!gate_said_unchecked_) {
    for (const HealthRow& row : report.rows) {
      if (row.verdict != HealthVerdict::kNotChecked) continue;
      gate_said_unchecked_ = true;
      log_.info("health check {}: not checked: {}", row.check, row.reason);
    }
  }
  if (report.memory) SayMemoryWait(restart_count, *report.memory);
  if (!report.healthy()) {
    Unhealthy(restart_count, report);
    return;
  }
  if (!gate_job_start_) {
    StartAttempt(restart_count);
    return;
  }
  Dispatch(PolicyEvent::JobStart(restart_count));
  // The job stopped this epoch while the gate held its start: the ranks stop again at once,
  // and the drain is reported as the job expects.
  if (gate_job_stop_ && !finished_) JobStop();
}

// The wait for the torn-down attempt's device memory (docs/runtime.md, "Device memory before a
// restart"): one line when it waited, one warning when the bound passed first; each wait is an
// event (status and /metrics count them).
void Supervisor::SayMemoryWait(int restart_count, const MemoryWaitReport& m) {
  if (!m.failed.empty()) {
    if (!std::exchange(memory_said_failed_, true)) {
      log_.warn("device memory before attempt {} not checked: {}", restart_count, m.failed);
    }
    return;
  }
  if (!m.fired) {
    log_.debug("attempt {}: every card's device memory was below {} MiB at once", restart_count,
               m.below_mib);
    return;
  }
  const std::string first = DescribeHeldMemory(m.first);
  if (m.held.empty()) {
    log_.info(
        "attempt {}: waited {:.1f} s for the last attempt's device memory to be freed "
        "({} at first; every card below {} MiB now)",
        restart_count, m.waited_s, first, m.below_mib);
  } else {
    log_.warn(
        "attempt {}: device memory still held after {:.1f} s (--device-memory-wait): {} "
        "(a process of the last attempt may be stuck in the driver); starting anyway",
        restart_count, m.waited_s, DescribeHeldMemory(m.held));
  }
  std::vector<std::string> cards;
  for (const HeldMemory& h : m.held.empty() ? m.first : m.held) cards.push_back(h.card);
  config_.events->On(
      JobEvent::DeviceMemoryWait(restart_count, m.waited_s, m.held.empty(), std::move(cards),
                                 DescribeHeldMemory(m.held.empty() ? m.first : m.held)));
}

// This node steps aside: no further attempt; exit 5 (job mode: the node agent says bye and
// the job re-forms without this node or waits for its replacement, docs/multinode.md).
void Supervisor::Unhealthy(int restart_count, const HealthReport& report) {
  const std::string what = report.Describe();
  log_.error("this node is unhealthy: {}; no attempt {} here (exit code 5)", what, restart_count);
  config_.events->On(JobEvent::Unhealthy(restart_count, report.UnhealthyCards(), what));
  state_.phase = Phase::kFinished;
  state_.cause = StopCause::kUnhealthy;
  state_.unhealthy = what;
  if (job_ != nullptr) asio::post(deps_.io, [job = job_, what] { job->Unhealthy(what); });
  Finish(exit_code::kStuckProcesses);
}

void Supervisor::JobStop() {
  if (gating() && gate_job_start_) {
    gate_job_stop_ = true;
    return;
  }
  if (finished_ || state_.phase != Phase::kRunning) return;
  log_.warn("stopping the ranks (SIGTERM, SIGKILL after {})", Seconds(config_.grace, -1));
  Dispatch(PolicyEvent::JobStop());
}

void Supervisor::Hang(bool restart) {
  if (finished_ || gating() || state_.phase != Phase::kRunning) return;
  log_.warn("stopping the ranks after a hang (SIGTERM, SIGKILL after {}){}",
            Seconds(config_.grace, -1), restart ? "; they restart if restarts are left" : "");
  hang_stop_ = true;
  Dispatch(PolicyEvent::Hang(restart));
}

void Supervisor::JobExit(int exit_code) {
  if (!finished_) Dispatch(PolicyEvent::JobExit(exit_code));
}

LocalStopReport Supervisor::MakeStopReport() const {
  LocalStopReport report;
  report.cause = state_.cause;
  switch (state_.cause) {
    case StopCause::kSignal:
      report.exit_code = exit_code::kSignalBase + state_.stop_signal;
      report.what = "its gculaunch received " + SignalName(state_.stop_signal);
      break;
    case StopCause::kSpawnFailed:
      report.exit_code = exit_code::kSpawnFailed;
      report.local_rank = state_.failed_local_rank.value_or(-1);
      report.what = outcome_.start_error ? outcome_.start_error->what : "spawn failed";
      break;
    default:
      report.local_rank = state_.failed_local_rank.value_or(-1);
      if (state_.failed_exit) {
        report.exit_code = state_.failed_exit->ShellCode();
        report.what = state_.failed_exit->Describe();
      }
      break;
  }
  if (report.local_rank >= 0 && group_) {
    for (const RankRecord& r : group_->Records()) {
      if (r.local_rank == report.local_rank) report.rank = r.rank;
    }
  }
  return report;
}

void Supervisor::Dispatch(const PolicyEvent& event) {
  PolicyStep step = Step(state_, config_.policy, event);
  if (state_.phase == Phase::kRunning && step.state.phase != Phase::kRunning) {
    stop_began_ = std::chrono::steady_clock::now();
  }
  state_ = step.state;
  for (const PolicyAction& action : step.actions) {
    if (finished_) break;
    Execute(action);
  }
}

void Supervisor::Execute(const PolicyAction& action) {
  using A = PolicyAction::Kind;
  switch (action.kind) {
    case A::kSignalGroups:
      if (!group_) break;  // job mode, before the first attempt
      // A teardown (not a forwarded USR1/USR2): nothing a rank does from now on is blamed.
      if (state_.phase == Phase::kStopping) group_->NoteStopSignal();
      group_->SignalAll(action.signal);
      ScheduleDrainCheck();
      break;
    case A::kStartGraceTimer:
      ArmTimer(grace_timer_, config_.grace, PolicyEvent::GraceExpired());
      break;
    case A::kKillGroups: {
      if (!group_) break;
      const int n = group_->SignalAll(SIGKILL);
      if (n > 0) log_.warn("sent SIGKILL to {} rank process group(s)", n);
      ScheduleDrainCheck();
      break;
    }
    case A::kStartKillTimer:
      ArmTimer(kill_timer_, config_.kill_wait, PolicyEvent::KillWaitExpired());
      break;
    case A::kStartAttempt:
      if (config_.policy.agent_decides) {
        StartAttempt(action.restart_count);  // the gate already held back the job's JobStart
        break;
      }
      AnnounceRestart(action);  // one node; the job logs its own restarts
      GateThenStart(action.restart_count, false);
      break;
    case A::kStartBackoff:
      BeginGate(action.restart_count);  // the checks overlap the wait
      AnnounceRestart(action);
      ArmTimer(backoff_timer_, SecondsToMillis(action.delay_s), PolicyEvent::BackoffExpired());
      break;
    case A::kReportStuck: {
      if (group_) outcome_.stuck = group_->Survivors();
      if (outcome_.stuck.empty() && group_ && !group_->scan_error().empty()) {
        log_.error("the ranks' process groups could not be checked for {}: {}; giving up on them",
                   Seconds(config_.kill_wait, -1), group_->scan_error());
        break;
      }
      log_.error("{} process(es) survived SIGKILL for {}; giving up on them (listed below)",
                 outcome_.stuck.size(), Seconds(config_.kill_wait, -1));
      break;
    }
    case A::kExit:
      Finish(action.exit_code);
      break;
    case A::kNotifyStop:
      if (job_ != nullptr) {
        asio::post(deps_.io, [job = job_, report = MakeStopReport()] { job->LocalStop(report); });
      }
      break;
    case A::kNotifyDrained:
      if (job_ != nullptr) {
        const bool success = state_.cause == StopCause::kSuccess;
        asio::post(deps_.io, [job = job_, success, report = report_] {
          job->AttemptDrained(success, report);
        });
      }
      break;
  }
}

// "rank 1 failed with exit code 3" (the attempt's first failure), "a hang (--hang-timeout)",
// or empty.  `ran`: " in 0.2 s" for a rank's failure (the log line's, not the event's).
std::string Supervisor::RestartReason(std::string* ran) {
  std::string why;
  for (const RankRecord& r : group_->Records()) {
    if (r.exited_while_running && r.exit && !r.exit->success()) {
      why = "rank " + std::to_string(r.rank) + " failed with " + r.exit->Describe();
      *ran = " in " + Seconds(stop_began_ - attempt_began_);
      break;
    }
  }
  if (why.empty() && hang_stop_) why = "a hang (--hang-timeout)";
  hang_stop_ = false;
  return why;
}

// One node: the restart's log line and events.  A back-off (kStartBackoff) logs and tells
// its wait when it begins; the restart event follows when the attempt starts (kStartAttempt
// after kBackoffExpired), with the wait it took.
void Supervisor::AnnounceRestart(const PolicyAction& action) {
  using A = PolicyAction::Kind;
  const int max = config_.policy.max_restarts;
  const double waited = state_.backoff_s;
  std::string why = restart_why_;
  if (action.kind == A::kStartBackoff || waited <= 0) {
    std::string ran;
    why = RestartReason(&ran);
    const std::string after = why.empty() ? "" : " after " + why + ran;
    if (action.kind == A::kStartBackoff) {
      restart_why_ = why;
      log_.warn(
          "restarting all ranks (restart {} of {}){}; waiting {} first (quick failures back "
          "off; --restart-backoff)",
          action.restart_count, max, after,
          Seconds(std::chrono::duration<double>(action.delay_s), -1));
      config_.events->On(JobEvent::Backoff(action.restart_count, action.delay_s, why));
      return;
    }
    log_.warn("restarting all ranks (restart {} of {}){}", action.restart_count, max, after);
  }
  JobEvent restart = JobEvent::Restart(
      action.restart_count, max, std::move(why),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - stop_began_).count());
  restart.backoff_s = waited;
  config_.events->On(restart);
}

void Supervisor::OnRankExit(int local_rank, WorkerExit exit) {
  std::optional<RankRecord> record;
  for (const RankRecord& r : group_->Records()) {
    if (r.local_rank == local_rank) record = r;
  }
  if (record) {
    config_.events->On(
        JobEvent::RankExit(record->restart_count, record->rank, local_rank, record->pid, exit));
  }
  const int rank = record ? record->rank : local_rank;
  const pid_t pid = record ? record->pid : -1;
  if (state_.phase == Phase::kRunning) {
    group_->MarkExitedWhileRunning(local_rank);
    if (!exit.success()) {
      log_.error(
          "rank {} (local rank {}, pid {}) failed with {}; stopping the other ranks "
          "(SIGTERM, SIGKILL after {})",
          rank, local_rank, pid, exit.Describe(), Seconds(config_.grace, -1));
    }
  } else if (state_.cause == StopCause::kJob && exit.kind == WorkerExit::Kind::kExited &&
             exit.value != 0) {
    // Another node's failure stopped the job, but this rank exited with a code of its own: it
    // may be the real cause, whose report lost the race to the marker (docs/multinode.md).
    log_.warn("rank {} (local rank {}, pid {}) exited with {} while the job stopped", rank,
              local_rank, pid, exit.Describe());
  }
  Dispatch(PolicyEvent::RankExited(local_rank, exit));
  ScheduleDrainCheck();
}

void Supervisor::ArmSignals() {
  signals_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    OnSignal(sig);
    if (!finished_) ArmSignals();
  }));
}

void Supervisor::OnSignal(int sig) {
  outcome_.signals.push_back(sig);
  const SignalClass cls = ClassifySignal(sig, config_.hup, config_.extra_stop_signals);
  if (cls == SignalClass::kTeardown && gating() && !gate_job_start_) {
    // No rank runs while the gate checks the cards: nothing to stop, exit as signalled.
    log_.warn("received {} while checking the cards' health: no attempt, exiting", SignalName(sig));
    state_.phase = Phase::kFinished;
    state_.cause = StopCause::kSignal;
    state_.stop_signal = sig;
    Finish(exit_code::kSignalBase + sig);
    return;
  }
  switch (cls) {
    case SignalClass::kTeardown:
      if (state_.phase == Phase::kBackingOff) {
        ++teardown_signals_;
        log_.warn("received {} while waiting to restart the ranks: no restart, exiting",
                  SignalName(sig));
      } else if (state_.phase == Phase::kWaitingForJob) {
        ++teardown_signals_;
        log_.warn("received {} while no rank runs (waiting for the job): exiting", SignalName(sig));
      } else if (teardown_signals_++ == 0 && state_.phase == Phase::kRunning) {
        log_.warn("received {}: forwarding it to every rank, SIGKILL after {}", SignalName(sig),
                  Seconds(config_.grace, -1));
      } else {
        log_.warn("received {} during shutdown: killing every rank now", SignalName(sig));
      }
      break;
    case SignalClass::kForward:
      log_.info("forwarding {} to every rank", SignalName(sig));
      break;
    case SignalClass::kIgnore:
      log_.info("ignoring {} (stdin is not a terminal; see docs/runtime.md)", SignalName(sig));
      break;
  }
  Dispatch(PolicyEvent::Signal(sig, cls));
}

void Supervisor::ScheduleDrainCheck() {
  if (drain_check_posted_ || finished_) return;
  drain_check_posted_ = true;
  asio::post(deps_.io, lifetime_.Wrap([this, gen = generation_] {
    drain_check_posted_ = false;
    if (gen == generation_) DrainCheck();
  }));
}

void Supervisor::DrainCheck() {
  if (finished_ || (state_.phase != Phase::kStopping && state_.phase != Phase::kKilling)) return;
  if (!group_->AllExited()) return;  // the next exit re-checks
  if (!group_->CheckGroupsEmpty()) {
    if (!group_->scan_error().empty() && !scan_error_logged_) {
      scan_error_logged_ = true;
      log_.warn(
          "cannot tell whether the ranks' process groups are empty ({}); they count as alive, "
          "so the grace period and SIGKILL still apply",
          group_->scan_error());
    }
    // Members left in a reaped rank's group (grandchildren).  There is no
    // event for processes that are not our children: look again shortly.
    drain_timer_.expires_after(config_.drain_poll);
    drain_timer_.async_wait(
        lifetime_.Wrap([this, gen = generation_](const boost::system::error_code& ec) {
          if (!ec && gen == generation_) DrainCheck();
        }));
    return;
  }
  if (!group_->OutputClosed()) {
    if (!output_timer_armed_) {
      output_timer_armed_ = true;
      output_timer_.expires_after(config_.output_drain);
      output_timer_.async_wait(
          lifetime_.Wrap([this, gen = generation_](const boost::system::error_code& ec) {
            if (ec || gen != generation_) return;
            log_.warn("rank output still open {} after the ranks exited; closing it",
                      Seconds(config_.output_drain, -1));
            group_->CloseOutput();  // on_output_closed schedules the next check
          }));
    }
    return;
  }
  output_timer_.cancel();
  Drained();
}

// Every rank of the attempt is gone.  A failed attempt is described for the failure streak
// first: its signature (read here: the error files are in the private directory), and with
// --progress-file the ranks' number, read off the loop (a file on a hung NFS mount must not
// stop the store); then the policy hears that the attempt drained.
void Supervisor::Drained() {
  if (describing_) return;
  const double ran_s = std::chrono::duration<double>(stop_began_ - attempt_began_).count();
  const bool failed = state_.cause != StopCause::kSuccess && state_.cause != StopCause::kSignal;
  report_ = AttemptReport{};
  if (failed) {
    const std::vector<RankRecord> records = group_->Records();
    const int attempt = group_->restart_count();
    report_.signature = AttemptSignature(records, attempt, ReadAttemptErrorFiles(records, attempt));
    if (!report_.signature.empty()) log_.debug("attempt {} failed: {}", attempt, report_.signature);
  }
  if (!failed || !progress_) {
    Dispatch(PolicyEvent::AttemptDrained(ran_s, report_));
    return;
  }
  describing_ = true;
  progress_->Read(lifetime_.Wrap([this, gen = generation_, ran_s](const ProgressReading& read) {
    if (gen != generation_ || finished_) return;
    describing_ = false;
    if (!read.value) log_.info("--progress-file: {}", read.note);
    report_.progress = read.value;
    Dispatch(PolicyEvent::AttemptDrained(ran_s, report_));
  }));
}

void Supervisor::ArmTimer(asio::steady_timer& timer, std::chrono::milliseconds after,
                          const PolicyEvent& event) {
  timer.expires_after(after);
  timer.async_wait(
      lifetime_.Wrap([this, gen = generation_, event](const boost::system::error_code& ec) {
        if (!ec && gen == generation_ && !finished_) Dispatch(event);
      }));
}

void Supervisor::CancelTimers() {
  grace_timer_.cancel();
  kill_timer_.cancel();
  drain_timer_.cancel();
  output_timer_.cancel();
  backoff_timer_.cancel();
}

void Supervisor::Finish(int exit_code) {
  finished_ = true;
  if (config_.health != nullptr) config_.health->Cancel();
  gate_waiting_ = false;
  // A program that could not be started: 126 or 127 as the shell says (the spawner knows).
  if (!config_.policy.agent_decides && state_.cause == StopCause::kSpawnFailed &&
      outcome_.start_error && outcome_.start_error->exit_code != 0) {
    exit_code = outcome_.start_error->exit_code;
  }
  outcome_.exit_code = exit_code;
  outcome_.final_state = state_;
  if (deps_.standbys != nullptr) deps_.standbys->DismissAll();
  if (group_) {
    auto records = group_->Records();
    outcome_.records.insert(outcome_.records.end(), records.begin(), records.end());
    group_->CloseOutput();
    outcome_.groups_empty = group_->CheckGroupsEmpty();
  }
  CancelTimers();
  boost::system::error_code ignored;
  signals_.cancel(ignored);
  if (job_ != nullptr) {
    asio::post(deps_.io, [job = job_, exit_code] { job->Finished(exit_code); });
  }
}

}  // namespace gculaunch
