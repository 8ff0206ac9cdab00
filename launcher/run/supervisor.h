// Supervisor: runs the attempts of one job on the io_context and carries out
// what RestartPolicy decides.
//
//   events in:  a rank exited (ChildWatcher via WorkerGroup), a signal
//               arrived (asio::signal_set: the handler only records and
//               dispatches on the loop), a timer fired, the attempt drained
//   actions out: signal the groups, arm the grace / kill-wait timers,
//               start the next attempt (after the back-off timer, when a crash
//               loop backs off: restart_backoff.h), report stuck processes, exit
//
// An attempt has drained when every rank exited, every rank's process
// group is empty (checked every `drain_poll` while grandchildren linger) and
// every output pipe reached end-of-file (or `output_drain` passed since the
// processes were gone: something that left the group may still hold a pipe).
// Only then does the AttemptObserver hear BeginAttempt() for the next one, so
// a store can reset knowing that no rank of the old attempt is alive.  A
// failed attempt is described first for the failure streak (failure_streak.h):
// its signature from the failing rank's error file or stderr, and with
// --progress-file the number the ranks left there, read off the loop within
// 2 s (progress_file.h); the policy then decides.
//
// With a health gate (SupervisorConfig::health, launcher/sys/health_runner.h) no attempt starts
// before the node's checks passed: the first, and every restart (during a back-off the checks
// run while it waits).  An unhealthy node starts nothing more and exits 5 (cause kUnhealthy);
// in job mode the gate holds back the job's JobStart, and the JobLink hears Unhealthy() before
// Finished(5), so that the node leaves the job.
//
// Multi-node jobs (job mode, PolicyConfig::job): a JobLink hears about local
// teardowns and drained attempts, and decides with JobStart/JobStop/JobExit
// what happens next; Run() then starts no attempt by itself.  JobLink calls
// are posted to the io_context, never made from inside the Supervisor's own
// dispatch, so the JobLink may call JobStart/JobStop/JobExit directly.
//
// Lifetime: Run() returns once the job ended; the WorkerGroup of the last
// attempt lives until the Supervisor is destroyed.
// Thread safety: io_context thread only; Run() runs the io_context.
#pragma once

#include <spdlog/logger.h>

#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/lifetime.h"
#include "launcher/run/job_events.h"
#include "launcher/run/progress_file.h"
#include "launcher/run/restart_policy.h"
#include "launcher/run/worker_group.h"
#include "launcher/sys/health_runner.h"

namespace gculaunch {

/// Told when an attempt is about to spawn: after every rank and process
/// group of the previous attempt is gone, before any rank of this one exists.
/// The rendezvous store plugs in here.
class AttemptObserver {
 public:
  virtual ~AttemptObserver() = default;
  virtual void BeginAttempt(int restart_count) = 0;
};

/// Job mode: the multi-node job this node's ranks belong to (node_agent.h).
class JobLink {
 public:
  virtual ~JobLink() = default;
  /// A local teardown began because a rank failed, could not start, or gculaunch received a
  /// teardown signal.
  virtual void LocalStop(const LocalStopReport& report) = 0;
  /// Every rank of the attempt is gone; the Supervisor waits for JobStart or JobExit.
  /// `success`: every rank exited 0 while the attempt ran; `report`: how a failure looked here
  /// (for node 0's failure streak).
  virtual void AttemptDrained(bool success, const AttemptReport& report) = 0;
  /// The Supervisor finished with `exit_code` (Run() has returned or is about to).
  virtual void Finished(int exit_code) = 0;
  /// The health gate found this node unhealthy (`what`: the checks, one line); Finished(5)
  /// follows: the node leaves the job so that the platform can replace it.
  virtual void Unhealthy(const std::string& /*what*/) {}
};

/// Job mode: what the job tells this node's ranks.  The Supervisor implements it; the
/// node agent's tests use a fake.
class JobControl {
 public:
  virtual ~JobControl() = default;
  /// Starts attempt `restart_count` (only while waiting for the job).
  virtual void JobStart(int restart_count) = 0;
  /// Stops the running ranks (grace period, then SIGKILL); the drain is reported.
  virtual void JobStop() = 0;
  /// Exits with `exit_code` (only while waiting for the job).
  virtual void JobExit(int exit_code) = 0;
};

struct SupervisorConfig {
  PolicyConfig policy;
  std::chrono::milliseconds grace{25000};        ///< SIGTERM (or the received signal) -> SIGKILL
  std::chrono::milliseconds kill_wait{5000};     ///< SIGKILL -> give up, report stuck, exit 5
  std::chrono::milliseconds output_drain{2000};  ///< processes gone -> stop waiting for pipe EOF
  std::chrono::milliseconds drain_poll{20};      ///< re-check of groups with lingering members
  HupMode hup = HupMode::kIgnore;
  bool catch_hup = true;  ///< false: SIGHUP keeps the SIG_IGN gculaunch inherited (nohup)
  std::vector<int> extra_stop_signals;  ///< --signals-to-handle: these stop the ranks too
  /// When gculaunch started, for the debug line that times each attempt's spawning.
  std::chrono::steady_clock::time_point launcher_start = std::chrono::steady_clock::now();
  /// Told when ranks start and exit, and of restarts (one node; the job tells its own).
  JobEvents* events = NoJobEvents();
  /// --progress-file: read after every failed attempt (the failure streak); empty: none.
  std::string progress_file;
  /// The health gate (docs/runtime.md, "Health checks"): run before every attempt, its
  /// restart's during the back-off already; an unhealthy node starts no further attempt and
  /// exits 5.  Null: no gate.
  HealthRunner* health = nullptr;
};

/// How the job ended.
struct JobOutcome {
  int exit_code = 0;
  PolicyState final_state;
  std::vector<RankRecord> records;   ///< every rank of every attempt, in order
  std::vector<sys::ProcInfo> stuck;  ///< survivors of SIGKILL (exit code 5)
  /// Every rank's process group was known empty at the end (false after a stuck report, or
  /// when /proc could not be read): the guardian is told "done" only then.
  bool groups_empty = true;
  std::optional<Error> start_error;  ///< why a rank could not be started
  int start_error_local_rank = -1;
  std::vector<int> signals;  ///< signals gculaunch received, in order
  int restarts = 0;
  double start_time = 0;  ///< unix seconds
  double end_time = 0;
};

class Supervisor : public JobControl {
 public:
  /// `job` is required in job mode (config.policy.agent_decides) and ignored otherwise.
  Supervisor(WorkerGroupDeps deps, spdlog::logger& log, const SupervisorConfig& config,
             AttemptPlanner& planner, AttemptObserver* observer, JobLink* job = nullptr);
  ~Supervisor() override;
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  /// Runs the job to its end.
  JobOutcome Run();

  // ---- JobControl (job mode; ignored in phases where they mean nothing) ----
  void JobStart(int restart_count) override;
  void JobStop() override;
  void JobExit(int exit_code) override;
  /// --hang-timeout found the attempt hung (launcher/ops/hang_watch.h): stop the ranks; with
  /// `restart`, restart them if restarts are left (as after a failure), else exit 6.  Ignored
  /// unless the attempt is running.
  void Hang(bool restart);
  /// The current phase (tests, the agent's logs).
  PolicyState::Phase phase() const { return state_.phase; }

  /// The current attempt's ranks (for tests and logs); null before Run().
  const WorkerGroup* group() const { return group_.get(); }

 private:
  void StartAttempt(int restart_count);
  void Dispatch(const PolicyEvent& event);
  void Execute(const PolicyAction& action);
  void OnRankExit(int local_rank, WorkerExit exit);
  void OnSignal(int sig);
  void ArmSignals();
  void ScheduleDrainCheck();
  void DrainCheck();
  void ArmTimer(boost::asio::steady_timer& timer, std::chrono::milliseconds after,
                const PolicyEvent& event);
  void CancelTimers();
  void Finish(int exit_code);
  void PrepareStandbys(int restart_count, const std::vector<RankLaunch>* plan);
  void Drained();
  WorkerGroup::Hooks GroupHooks(int restart_count);
  void StartFailed(int local_rank, const Error& error);
  std::string RestartReason(std::string* ran);
  void AnnounceRestart(const PolicyAction& action);
  LocalStopReport MakeStopReport() const;
  // The health gate (health_runner.h).
  void GateThenStart(int restart_count, bool job_start);
  void BeginGate(int restart_count);
  void GateDone(int restart_count, HealthReport report);
  void PassGate();
  void Unhealthy(int restart_count, const HealthReport& report);
  void SayMemoryWait(int restart_count, const MemoryWaitReport& m);
  bool gating() const { return gate_waiting_; }

  WorkerGroupDeps deps_;
  spdlog::logger& log_;
  SupervisorConfig config_;
  AttemptPlanner& planner_;
  AttemptObserver* observer_;
  JobLink* job_;

  PolicyState state_;
  JobOutcome outcome_;
  std::unique_ptr<WorkerGroup> group_;
  boost::asio::signal_set signals_;
  boost::asio::steady_timer grace_timer_;
  boost::asio::steady_timer kill_timer_;
  boost::asio::steady_timer drain_timer_;
  boost::asio::steady_timer output_timer_;
  boost::asio::steady_timer backoff_timer_;
  bool output_timer_armed_ = false;
  bool drain_check_posted_ = false;
  bool scan_error_logged_ = false;  ///< the drain check's /proc failure, once per attempt
  bool finished_ = false;
  /// Bumped per attempt: a timer or posted check of an older attempt is ignored.
  uint64_t generation_ = 0;
  int teardown_signals_ = 0;
  std::chrono::steady_clock::time_point stop_began_{};     ///< the running attempt began to stop
  std::chrono::steady_clock::time_point attempt_began_{};  ///< the current attempt was spawned
  std::string restart_why_;  ///< the back-off's reason, for the restart event that follows it
  bool hang_stop_ = false;   ///< the current teardown came from Hang() (for the restart log)
  std::unique_ptr<ProgressFile> progress_;  ///< --progress-file; null: none
  bool describing_ = false;  ///< the drained attempt's report is being made (progress read)
  AttemptReport report_;     ///< the last drained attempt's, for the job (NotifyDrained)
  int gate_attempt_ = -1;    ///< the attempt the gate's check under way (or done) is for
  std::optional<HealthReport> gate_report_;  ///< its result, once known
  bool gate_waiting_ = false;                ///< an attempt waits for the gate
  bool gate_job_start_ = false;       ///< job mode: the gate holds back JobStart(gate_attempt_)
  bool gate_job_stop_ = false;        ///< job mode: JobStop arrived while the gate held JobStart
  bool gate_said_unchecked_ = false;  ///< "not checked" rows are told once
  bool memory_said_failed_ = false;   ///< a failed device memory query is told once
  std::chrono::steady_clock::time_point gate_began_{};
  LifetimeGuard lifetime_;  ///< last member: expires first
};

}  // namespace gculaunch
