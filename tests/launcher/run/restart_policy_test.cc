#include "launcher/run/restart_policy.h"

#include <catch2/catch.hpp>
#include <csignal>
#include <string>
#include <vector>

namespace gculaunch {
namespace {

using E = PolicyEvent;
using A = PolicyAction;
using Phase = PolicyState::Phase;

// One row: events fed in order from a fresh state, and the actions each
// event must produce.
struct Row {
  std::string name;
  PolicyConfig config;
  std::vector<std::pair<PolicyEvent, std::vector<PolicyAction>>> steps;
  Phase final_phase;
};

std::string Describe(const std::vector<PolicyAction>& actions) {
  std::string out = "[";
  for (const auto& a : actions) out += (out.size() > 1 ? ", " : "") + ActionName(a);
  return out + "]";
}

const E kOk0 = E::RankExited(0, WorkerExit::Exited(0));
const E kOk1 = E::RankExited(1, WorkerExit::Exited(0));
const E kFail1 = E::RankExited(1, WorkerExit::Exited(3));
const E kTermed0 = E::RankExited(0, WorkerExit::Signaled(SIGTERM));
const E kKilled0 = E::RankExited(0, WorkerExit::Signaled(SIGKILL));
const E kDrained = E::AttemptDrained();
const E kTerm = E::Signal(SIGTERM, SignalClass::kTeardown);
const E kInt = E::Signal(SIGINT, SignalClass::kTeardown);
const E kUsr1 = E::Signal(SIGUSR1, SignalClass::kForward);
const E kHupIgnored = E::Signal(SIGHUP, SignalClass::kIgnore);
const std::vector<A> kNone;
const std::vector<A> kTeardownTerm = {A::SignalGroups(SIGTERM), A::StartGraceTimer()};
const std::vector<A> kEscalate = {A::KillGroups(), A::StartKillTimer()};

}  // namespace

TEST_CASE("restart policy: table of event sequences", "[restart_policy]") {
  const PolicyConfig two{2, 0};
  const PolicyConfig two_restart1{2, 1};
  const std::vector<Row> rows = {
      {"a hang (--on-hang stop) -> SIGTERM to every group, exit 6 after the drain",
       two_restart1,
       {{E::Hang(false), kTeardownTerm}, {kTermed0, kNone}, {kDrained, {A::Exit(6)}}},
       Phase::kFinished},
      {"a hang (--on-hang restart) with a restart left -> the next attempt",
       two_restart1,
       {{E::Hang(true), kTeardownTerm}, {kTermed0, kNone}, {kDrained, {A::StartAttempt(1)}}},
       Phase::kRunning},
      {"a hang (--on-hang restart) without a restart left -> exit 6",
       two,
       {{E::Hang(true), kTeardownTerm}, {kDrained, {A::Exit(6)}}},
       Phase::kFinished},
      {"a hang during a teardown changes nothing",
       two,
       {{kFail1, kTeardownTerm}, {E::Hang(false), kNone}, {kDrained, {A::Exit(3)}}},
       Phase::kFinished},
      {"all ranks exit 0 -> exit 0 once drained",
       two,
       {{kOk0, kNone}, {kOk1, kTeardownTerm}, {kDrained, {A::Exit(0)}}},
       Phase::kFinished},
      {"one rank fails -> SIGTERM to the others, its code after the drain",
       two,
       {{kFail1, kTeardownTerm}, {kTermed0, kNone}, {kDrained, {A::Exit(3)}}},
       Phase::kFinished},
      {"a failing rank killed by a signal -> 128+signal",
       two,
       {{E::RankExited(0, WorkerExit::Signaled(SIGSEGV)), kTeardownTerm},
        {kOk1, kNone},
        {kDrained, {A::Exit(128 + SIGSEGV)}}},
       Phase::kFinished},
      {"grace period over -> SIGKILL, then exit after the drain",
       two,
       {{kFail1, kTeardownTerm},
        {E::GraceExpired(), kEscalate},
        {kKilled0, kNone},
        {kDrained, {A::Exit(3)}}},
       Phase::kFinished},
      {"SIGKILL did not help -> report stuck, exit 5",
       two,
       {{kFail1, kTeardownTerm},
        {E::GraceExpired(), kEscalate},
        {E::KillWaitExpired(), {A::ReportStuck(), A::Exit(5)}},
        {kDrained, kNone}},
       Phase::kFinished},
      {"SIGTERM to gculaunch -> forwarded, grace, exit 143",
       two,
       {{kTerm, {A::SignalGroups(SIGTERM), A::StartGraceTimer()}},
        {kTermed0, kNone},
        {E::RankExited(1, WorkerExit::Exited(0)), kNone},
        {kDrained, {A::Exit(143)}}},
       Phase::kFinished},
      {"SIGINT is forwarded as SIGINT; a second signal kills at once; exit 130",
       two,
       {{kInt, {A::SignalGroups(SIGINT), A::StartGraceTimer()}},
        {kTerm, kEscalate},
        {kInt, {A::KillGroups()}},
        {kDrained, {A::Exit(130)}}},
       Phase::kFinished},
      {"SIGUSR1 is forwarded and nothing stops",
       two,
       {{kUsr1, {A::SignalGroups(SIGUSR1)}},
        {kUsr1, {A::SignalGroups(SIGUSR1)}},
        {kOk0, kNone},
        {kOk1, kTeardownTerm}},
       Phase::kStopping},
      {"an ignored SIGHUP does nothing",
       two,
       {{kHupIgnored, kNone}, {kOk0, kNone}},
       Phase::kRunning},
      {"restart once, then succeed",
       two_restart1,
       {{kFail1, kTeardownTerm},
        {kTermed0, kNone},
        {kDrained, {A::StartAttempt(1)}},
        {kOk0, kNone},
        {kOk1, kTeardownTerm},
        {kDrained, {A::Exit(0)}}},
       Phase::kFinished},
      {"restarts used up -> the last failure's code",
       two_restart1,
       {{kFail1, kTeardownTerm},
        {kDrained, {A::StartAttempt(1)}},
        {E::RankExited(0, WorkerExit::Exited(9)), kTeardownTerm},
        {kDrained, {A::Exit(9)}}},
       Phase::kFinished},
      {"a signal during a failure teardown cancels the restart",
       two_restart1,
       {{kFail1, kTeardownTerm}, {kTerm, kEscalate}, {kDrained, {A::Exit(143)}}},
       Phase::kFinished},
      {"a rank that cannot be started -> teardown, 127, no restart",
       two_restart1,
       {{E::SpawnFailed(1), kTeardownTerm}, {kKilled0, kNone}, {kDrained, {A::Exit(127)}}},
       Phase::kFinished},
      {"stale timers and early drains are ignored while running",
       two,
       {{E::GraceExpired(), kNone}, {E::KillWaitExpired(), kNone}, {kDrained, kNone}},
       Phase::kRunning},
      {"a signal after success keeps exit 0 but escalates",
       two,
       {{kOk0, kNone}, {kOk1, kTeardownTerm}, {kTerm, kEscalate}, {kDrained, {A::Exit(0)}}},
       Phase::kFinished},
      {"nothing happens after exit",
       two,
       {{kFail1, kTeardownTerm}, {kDrained, {A::Exit(3)}}, {kTerm, kNone}, {kDrained, kNone}},
       Phase::kFinished},
  };

  for (const Row& row : rows) {
    INFO(row.name);
    PolicyState state;
    for (size_t i = 0; i < row.steps.size(); ++i) {
      const auto& [event, expected] = row.steps[i];
      PolicyStep step = Step(state, row.config, event);
      INFO("step " << i << ": got " << Describe(step.actions) << ", expected "
                   << Describe(expected));
      CHECK(step.actions == expected);
      state = step.state;
    }
    CHECK(PhaseNameForTest(state.phase) == PhaseNameForTest(row.final_phase));
  }
}

TEST_CASE("restart policy: job mode (multi-node) asks the job", "[restart_policy]") {
  const PolicyConfig job{2, 1, true};
  const std::vector<A> kTeardownNotify = {A::SignalGroups(SIGTERM), A::StartGraceTimer(),
                                          A::NotifyStop()};
  const std::vector<Row> rows = {
      {"nothing runs until the job starts attempt 0; success is reported, not exited",
       job,
       {{kOk0, kNone},
        {E::JobStart(0), {A::StartAttempt(0)}},
        {kOk0, kNone},
        {kOk1, kTeardownTerm},
        {kDrained, {A::NotifyDrained()}},
        {E::JobExit(0), {A::Exit(0)}}},
       Phase::kFinished},
      {"a local failure is reported; the restart waits for the job's go",
       job,
       {{E::JobStart(0), {A::StartAttempt(0)}},
        {kFail1, kTeardownNotify},
        {kTermed0, kNone},
        {kDrained, {A::NotifyDrained()}},
        {E::JobStart(1), {A::StartAttempt(1)}},
        {kOk0, kNone},
        {kOk1, kTeardownTerm},
        {kDrained, {A::NotifyDrained()}}},
       Phase::kWaitingForJob},
      {"the job stops the ranks (another node failed): not reported back as local",
       job,
       {{E::JobStart(0), {A::StartAttempt(0)}},
        {E::JobStop(), kTeardownTerm},
        {E::JobStop(), kNone},
        {kTermed0, kNone},
        {E::GraceExpired(), kEscalate},
        {kDrained, {A::NotifyDrained()}},
        {E::JobExit(7), {A::Exit(7)}}},
       Phase::kFinished},
      {"a teardown signal is reported and the node leaves without waiting: 143",
       job,
       {{E::JobStart(0), {A::StartAttempt(0)}},
        {kTerm, {A::SignalGroups(SIGTERM), A::StartGraceTimer(), A::NotifyStop()}},
        {kDrained, {A::Exit(143)}}},
       Phase::kFinished},
      {"a signal while waiting for the job exits at once",
       job,
       {{kInt, {A::Exit(130)}}},
       Phase::kFinished},
      {"a spawn failure is reported like a rank failure",
       job,
       {{E::JobStart(0), {A::StartAttempt(0)}},
        {E::SpawnFailed(1), kTeardownNotify},
        {kDrained, {A::NotifyDrained()}}},
       Phase::kWaitingForJob},
      {"job events out of place are ignored",
       job,
       {{E::JobStop(), kNone},
        {E::JobStart(0), {A::StartAttempt(0)}},
        {E::JobStart(1), kNone},
        {E::JobExit(3), kNone},
        {kUsr1, {A::SignalGroups(SIGUSR1)}}},
       Phase::kRunning},
      {"stuck ranks still end the node with 5",
       job,
       {{E::JobStart(0), {A::StartAttempt(0)}},
        {E::JobStop(), kTeardownTerm},
        {E::GraceExpired(), kEscalate},
        {E::KillWaitExpired(), {A::ReportStuck(), A::Exit(5)}}},
       Phase::kFinished},
  };
  for (const Row& row : rows) {
    INFO(row.name);
    PolicyState state = InitialState(row.config);
    CHECK(state.phase == Phase::kWaitingForJob);
    for (size_t i = 0; i < row.steps.size(); ++i) {
      const auto& [event, expected] = row.steps[i];
      PolicyStep step = Step(state, row.config, event);
      INFO("step " << i << ": got " << Describe(step.actions) << ", expected "
                   << Describe(expected));
      CHECK(step.actions == expected);
      state = step.state;
    }
    CHECK(PhaseNameForTest(state.phase) == PhaseNameForTest(row.final_phase));
  }
  CHECK(InitialState(PolicyConfig{2, 1, false}).phase == Phase::kRunning);
}

TEST_CASE("restart policy: a restart resets the attempt and counts it", "[restart_policy]") {
  PolicyState state;
  const PolicyConfig config{2, 3};
  state = Step(state, config, kFail1).state;
  CHECK(state.failed_local_rank == 1);
  CHECK(state.cause == StopCause::kRankFailed);
  state = Step(state, config, kDrained).state;
  CHECK(state.restart_count == 1);
  CHECK(state.phase == Phase::kRunning);
  CHECK(state.exited == 0);
  CHECK_FALSE(state.failed_local_rank.has_value());
  CHECK(state.cause == StopCause::kNone);
}

TEST_CASE("restart policy: a crash loop backs off (--restart-backoff)", "[restart_policy]") {
  const PolicyConfig backoff{2, 100, false, DefaultBackoffForTest()};
  const PolicyConfig off{2, 100, false, MakeBackoff(0, 0)};
  const E quick = E::AttemptDrained(0.1);
  const E long_run = E::AttemptDrained(120);
  const E expired = E::BackoffExpired();
  const std::vector<Row> rows = {
      {"quick failures: restart 1 at once, then 1 s, 2 s, 4 s",
       backoff,
       {{kFail1, kTeardownTerm},
        {quick, {A::StartAttempt(1)}},
        {kFail1, kTeardownTerm},
        {quick, {A::StartBackoff(2, 1)}},
        {expired, {A::StartAttempt(2)}},
        {kFail1, kTeardownTerm},
        {quick, {A::StartBackoff(3, 2)}},
        {expired, {A::StartAttempt(3)}},
        {kFail1, kTeardownTerm},
        {quick, {A::StartBackoff(4, 4)}}},
       Phase::kBackingOff},
      {"off: every restart at once",
       off,
       {{kFail1, kTeardownTerm},
        {quick, {A::StartAttempt(1)}},
        {kFail1, kTeardownTerm},
        {quick, {A::StartAttempt(2)}},
        {kFail1, kTeardownTerm},
        {quick, {A::StartAttempt(3)}}},
       Phase::kRunning},
      {"an attempt that ran 60 s or more resets the streak",
       backoff,
       {{kFail1, kTeardownTerm},
        {quick, {A::StartAttempt(1)}},
        {kFail1, kTeardownTerm},
        {quick, {A::StartBackoff(2, 1)}},
        {expired, {A::StartAttempt(2)}},
        {kFail1, kTeardownTerm},
        {long_run, {A::StartAttempt(3)}}},
       Phase::kRunning},
      {"SIGTERM during the back-off: exit 143 at once, no attempt starts",
       backoff,
       {{kFail1, kTeardownTerm},
        {quick, {A::StartAttempt(1)}},
        {kFail1, kTeardownTerm},
        {quick, {A::StartBackoff(2, 1)}},
        {kTerm, {A::Exit(143)}},
        {expired, kNone}},
       Phase::kFinished},
      {"SIGINT during the back-off: exit 130",
       backoff,
       {{kFail1, kTeardownTerm},
        {quick, {A::StartAttempt(1)}},
        {kFail1, kTeardownTerm},
        {quick, {A::StartBackoff(2, 1)}},
        {kInt, {A::Exit(130)}}},
       Phase::kFinished},
      {"during the back-off a forwarded signal, a hang or a stale timer do nothing",
       backoff,
       {{kFail1, kTeardownTerm},
        {quick, {A::StartAttempt(1)}},
        {kFail1, kTeardownTerm},
        {quick, {A::StartBackoff(2, 1)}},
        {kUsr1, kNone},
        {E::Hang(true), kNone},
        {E::GraceExpired(), kNone},
        {kDrained, kNone},
        {expired, {A::StartAttempt(2)}},
        {expired, kNone}},
       Phase::kRunning},
      {"the last restart backs off too, then the failure's exit code",
       PolicyConfig{2, 2, false, DefaultBackoffForTest()},
       {{kFail1, kTeardownTerm},
        {quick, {A::StartAttempt(1)}},
        {kFail1, kTeardownTerm},
        {quick, {A::StartBackoff(2, 1)}},
        {expired, {A::StartAttempt(2)}},
        {kFail1, kTeardownTerm},
        {quick, {A::Exit(3)}}},
       Phase::kFinished},
      {"job mode never backs off by itself (node 0's coordinator decides)",
       PolicyConfig{2, 100, true, DefaultBackoffForTest()},
       {{E::JobStart(0), {A::StartAttempt(0)}},
        {kFail1, {A::SignalGroups(SIGTERM), A::StartGraceTimer(), A::NotifyStop()}},
        {quick, {A::NotifyDrained()}},
        {E::JobStart(1), {A::StartAttempt(1)}},
        {kFail1, {A::SignalGroups(SIGTERM), A::StartGraceTimer(), A::NotifyStop()}},
        {quick, {A::NotifyDrained()}}},
       Phase::kWaitingForJob},
  };
  for (const Row& row : rows) {
    INFO(row.name);
    PolicyState state = InitialState(row.config);
    for (size_t i = 0; i < row.steps.size(); ++i) {
      const auto& [event, expected] = row.steps[i];
      PolicyStep step = Step(state, row.config, event);
      INFO("step " << i << ": got " << Describe(step.actions) << ", expected "
                   << Describe(expected));
      CHECK(step.actions == expected);
      state = step.state;
    }
    CHECK(PhaseNameForTest(state.phase) == PhaseNameForTest(row.final_phase));
  }
}

TEST_CASE("restart policy: the same failure stops the loop (--max-same-failures)",
          "[restart_policy]") {
  const StreakConfig streak{3, "", 10};
  const PolicyConfig config{2, 100, false, MakeBackoff(0, 0), streak};
  const std::string sig = "exit code 3: KeyError: 'lr'";
  auto drained = [](double ran_s, std::string signature) {
    return E::AttemptDrained(ran_s, AttemptReport{std::move(signature), std::nullopt});
  };
  const std::vector<Row> rows = {
      {"4 quick attempts failing the same: no 4th restart, the rank's exit code",
       config,
       {{kFail1, kTeardownTerm},
        {drained(0.2, sig), {A::StartAttempt(1)}},
        {kFail1, kTeardownTerm},
        {drained(0.2, sig), {A::StartAttempt(2)}},
        {kFail1, kTeardownTerm},
        {drained(0.2, sig), {A::StartAttempt(3)}},
        {kFail1, kTeardownTerm},
        {drained(0.2, sig), {A::Exit(3)}}},
       Phase::kFinished},
      {"failing differently each time keeps every restart",
       config,
       {{kFail1, kTeardownTerm},
        {drained(0.2, "exit code 3: a"), {A::StartAttempt(1)}},
        {kFail1, kTeardownTerm},
        {drained(0.2, "exit code 3: b"), {A::StartAttempt(2)}},
        {kFail1, kTeardownTerm},
        {drained(0.2, "exit code 3: c"), {A::StartAttempt(3)}},
        {kFail1, kTeardownTerm},
        {drained(0.2, "exit code 3: d"), {A::StartAttempt(4)}}},
       Phase::kRunning},
      {"slow attempts failing the same keep their restarts",
       config,
       {{kFail1, kTeardownTerm},
        {drained(30, sig), {A::StartAttempt(1)}},
        {kFail1, kTeardownTerm},
        {drained(30, sig), {A::StartAttempt(2)}},
        {kFail1, kTeardownTerm},
        {drained(30, sig), {A::StartAttempt(3)}},
        {kFail1, kTeardownTerm},
        {drained(30, sig), {A::StartAttempt(4)}}},
       Phase::kRunning},
      {"a hang restart in between starts over",
       config,
       {{kFail1, kTeardownTerm},
        {drained(0.2, sig), {A::StartAttempt(1)}},
        {kFail1, kTeardownTerm},
        {drained(0.2, sig), {A::StartAttempt(2)}},
        {E::Hang(true), kTeardownTerm},
        {drained(0.2, ""), {A::StartAttempt(3)}},
        {kFail1, kTeardownTerm},
        {drained(0.2, sig), {A::StartAttempt(4)}}},
       Phase::kRunning},
      {"with the back-off on, the stop comes instead of the 4th restart's wait",
       PolicyConfig{2, 100, false, DefaultBackoffForTest(), streak},
       {{kFail1, kTeardownTerm},
        {drained(0.2, sig), {A::StartAttempt(1)}},
        {kFail1, kTeardownTerm},
        {drained(0.2, sig), {A::StartBackoff(2, 1)}},
        {E::BackoffExpired(), {A::StartAttempt(2)}},
        {kFail1, kTeardownTerm},
        {drained(0.2, sig), {A::StartBackoff(3, 2)}},
        {E::BackoffExpired(), {A::StartAttempt(3)}},
        {kFail1, kTeardownTerm},
        {drained(0.2, sig), {A::Exit(3)}}},
       Phase::kFinished},
      {"job mode: the node only reports (node 0's coordinator decides)",
       PolicyConfig{2, 100, true, MakeBackoff(0, 0), streak},
       {{E::JobStart(0), {A::StartAttempt(0)}},
        {kFail1, {A::SignalGroups(SIGTERM), A::StartGraceTimer(), A::NotifyStop()}},
        {drained(0.2, sig), {A::NotifyDrained()}},
        {E::JobStart(1), {A::StartAttempt(1)}},
        {kFail1, {A::SignalGroups(SIGTERM), A::StartGraceTimer(), A::NotifyStop()}},
        {drained(0.2, sig), {A::NotifyDrained()}}},
       Phase::kWaitingForJob},
  };
  for (const Row& row : rows) {
    INFO(row.name);
    PolicyState state = InitialState(row.config);
    for (size_t i = 0; i < row.steps.size(); ++i) {
      const auto& [event, expected] = row.steps[i];
      PolicyStep step = Step(state, row.config, event);
      INFO("step " << i << ": got " << Describe(step.actions) << ", expected "
                   << Describe(expected));
      CHECK(step.actions == expected);
      state = step.state;
    }
    CHECK(PhaseNameForTest(state.phase) == PhaseNameForTest(row.final_phase));
  }
  // The stop says why, and keeps the failure's cause and exit.
  PolicyState state;
  for (int i = 0; i < 4; ++i) {
    state = Step(state, config, kFail1).state;
    state = Step(state, config, drained(0.2, sig)).state;
  }
  CHECK(state.phase == Phase::kFinished);
  CHECK(state.cause == StopCause::kRankFailed);
  CHECK(ExitCodeFor(state) == 3);
  CHECK(state.loop_stop ==
        "the same failure 4 times in a row: " + sig + "; not restarting (--max-same-failures)");
}

TEST_CASE("restart policy: the wait before an attempt stays in its state", "[restart_policy]") {
  const PolicyConfig config{1, 10, false, DefaultBackoffForTest()};
  PolicyState state;
  for (int i = 0; i < 2; ++i) {
    state = Step(state, config, kFail1).state;
    state = Step(state, config, E::AttemptDrained(0)).state;
    if (state.phase == Phase::kBackingOff) state = Step(state, config, E::BackoffExpired()).state;
  }
  CHECK(state.restart_count == 2);
  CHECK(state.backoff_s == 1);  // the wait restart 2 took: the restart event tells it
  CHECK(state.backoff.streak == 2);
  CHECK(ActionName(A::StartBackoff(2, 1.5)) == "StartBackoff(2, 1.5 s)");
}

TEST_CASE("restart policy: the signal table", "[restart_policy]") {
  CHECK(ClassifySignal(SIGINT, HupMode::kIgnore) == SignalClass::kTeardown);
  CHECK(ClassifySignal(SIGTERM, HupMode::kIgnore) == SignalClass::kTeardown);
  CHECK(ClassifySignal(SIGQUIT, HupMode::kIgnore) == SignalClass::kTeardown);
  CHECK(ClassifySignal(SIGHUP, HupMode::kTeardown) == SignalClass::kTeardown);
  CHECK(ClassifySignal(SIGHUP, HupMode::kIgnore) == SignalClass::kIgnore);
  CHECK(ClassifySignal(SIGUSR1, HupMode::kIgnore) == SignalClass::kForward);
  CHECK(ClassifySignal(SIGUSR2, HupMode::kTeardown) == SignalClass::kForward);
  CHECK(ClassifySignal(SIGWINCH, HupMode::kTeardown) == SignalClass::kIgnore);
}

TEST_CASE("restart policy: --signals-to-handle makes a signal stop the ranks", "[restart_policy]") {
  const std::vector<int> extra = {SIGUSR1, SIGALRM};
  CHECK(ClassifySignal(SIGUSR1, HupMode::kIgnore, extra) == SignalClass::kTeardown);
  CHECK(ClassifySignal(SIGALRM, HupMode::kIgnore, extra) == SignalClass::kTeardown);
  CHECK(ClassifySignal(SIGUSR2, HupMode::kIgnore, extra) == SignalClass::kForward);
  CHECK(ClassifySignal(SIGTERM, HupMode::kIgnore, extra) == SignalClass::kTeardown);
  CHECK(ClassifySignal(SIGALRM, HupMode::kIgnore) == SignalClass::kIgnore);
}

TEST_CASE("restart policy: exit codes", "[restart_policy]") {
  PolicyState s;
  s.cause = StopCause::kSuccess;
  CHECK(ExitCodeFor(s) == 0);
  s.cause = StopCause::kRankFailed;
  s.failed_exit = WorkerExit::Signaled(SIGKILL);
  CHECK(ExitCodeFor(s) == 137);
  s.cause = StopCause::kSignal;
  s.stop_signal = SIGINT;
  CHECK(ExitCodeFor(s) == 130);
  s.cause = StopCause::kSpawnFailed;
  CHECK(ExitCodeFor(s) == 127);
  s.cause = StopCause::kNone;
  CHECK(ExitCodeFor(s) == 70);
}

}  // namespace gculaunch
