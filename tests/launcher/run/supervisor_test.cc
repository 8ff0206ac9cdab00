#include "launcher/run/supervisor.h"

#include <signal.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>
#include <functional>
#include <sstream>
#include <thread>

#include "launcher/sys/process_group.h"
#include "tests/launcher/run/worker_fixture.h"
#include "tests/support/test_util.h"

namespace gculaunch {
namespace {

class FunctionPlanner : public AttemptPlanner {
 public:
  explicit FunctionPlanner(std::function<Result<std::vector<RankLaunch>>(int)> f)
      : f_(std::move(f)) {}
  Result<std::vector<RankLaunch>> PlanAttempt(int restart_count) override {
    return f_(restart_count);
  }

 private:
  std::function<Result<std::vector<RankLaunch>>(int)> f_;
};

// Records BeginAttempt calls and, from the second attempt on, checks that
// no process of the first attempt is alive: the rank whose pid is in
// `pid_file`, its group, and the grandchild whose pid is in `grandchild_file`.
class CheckingObserver : public AttemptObserver {
 public:
  void BeginAttempt(int restart_count) override {
    attempts.push_back(restart_count);
    if (restart_count == 0) return;
    const pid_t rank = std::stoi(testing::ReadFile(pid_file));
    const pid_t grandchild = std::stoi(testing::ReadFile(grandchild_file));
    checked = true;
    leftovers_seen = testing::ProcessAlive(rank) || testing::ProcessAlive(grandchild) ||
                     sys::GroupAliveForTest(rank);
  }
  std::string pid_file, grandchild_file;
  std::vector<int> attempts;
  bool checked = false;
  bool leftovers_seen = false;
};

// A Supervisor over test_child ranks; its log goes to `log_text`.
struct Fixture : testing::WorkerFixture {
  Fixture()
      : log_sink(std::make_shared<spdlog::sinks::ostream_sink_st>(log_text)),
        log("test", log_sink) {
    log_sink->set_pattern("%l: %v");
  }

  JobOutcome Run(int nranks, std::function<Result<std::vector<RankLaunch>>(int)> plan,
                 SupervisorConfig config = {}, AttemptObserver* observer = nullptr) {
    config.policy.nranks = nranks;
    FunctionPlanner planner(std::move(plan));
    Supervisor supervisor(Deps(), log, config, planner, observer);
    JobOutcome outcome = supervisor.Run();
    writer.Finish(std::chrono::seconds(10));
    return outcome;
  }

  std::ostringstream log_text;
  std::shared_ptr<spdlog::sinks::ostream_sink_st> log_sink;
  spdlog::logger log;
};

}  // namespace

TEST_CASE("supervisor: every rank exits 0 -> exit 0", "[supervisor]") {
  Fixture f;
  const JobOutcome outcome = f.Run(3, [&](int) -> Result<std::vector<RankLaunch>> {
    return std::vector<RankLaunch>{f.Rank(0, {"exit", "0"}), f.Rank(1, {"exit", "0"}),
                                   f.Rank(2, {"print", "done", "exit", "0"})};
  });
  CHECK(outcome.exit_code == 0);
  CHECK(outcome.restarts == 0);
  REQUIRE(outcome.records.size() == 3);
  for (const RankRecord& r : outcome.records) {
    CHECK(r.exit == WorkerExit::Exited(0));
    CHECK(r.exited_while_running);
  }
  CHECK(testing::ReadFile(f.dir.File("console.out")) == "[rank2]: done\n");
}

TEST_CASE("supervisor: a failing rank stops the others and sets the exit code", "[supervisor]") {
  Fixture f;
  const std::string marker = f.dir.File("marker");
  const JobOutcome outcome = f.Run(3, [&](int) -> Result<std::vector<RankLaunch>> {
    return std::vector<RankLaunch>{f.Rank(0, {"trap", "TERM", marker, "0", "pause"}),
                                   f.Rank(1, {"eprint", "Traceback (most recent call last):",
                                              "eprint", "ValueError: boom", "exit", "3"}),
                                   f.Rank(2, {"pause"})};
  });
  CHECK(outcome.exit_code == 3);
  REQUIRE(outcome.records.size() == 3);
  CHECK(outcome.records[1].exit == WorkerExit::Exited(3));
  CHECK(outcome.records[1].exited_while_running);
  CHECK(outcome.records[1].stderr_tail ==
        std::vector<std::string>{"Traceback (most recent call last):", "ValueError: boom"});
  CHECK(outcome.records[2].exit == WorkerExit::Signaled(SIGTERM));
  CHECK_FALSE(outcome.records[2].exited_while_running);
  CHECK(f.log_text.str().find("rank 1 (local rank 1, pid " +
                              std::to_string(outcome.records[1].pid) +
                              ") failed with exit code 3") != std::string::npos);
  // rank 0's trap may or may not have been installed when SIGTERM came; if
  // it was, it wrote the marker and exited 0, else SIGTERM killed it.
  const bool trapped = testing::ReadFile(marker) == "TERM\n";
  CHECK(outcome.records[0].exit ==
        (trapped ? WorkerExit::Exited(0) : WorkerExit::Signaled(SIGTERM)));
}

TEST_CASE("supervisor: SIGKILL after the grace period", "[supervisor]") {
  Fixture f;
  const std::string fifo = f.dir.File("ready");
  testing::MakeFifo(fifo);
  SupervisorConfig config;
  config.grace = std::chrono::milliseconds(50);
  // Rank 1 fails only after rank 0 ignores SIGTERM (it waits for rank 0's FIFO message).
  const JobOutcome outcome = f.Run(
      2,
      [&](int) -> Result<std::vector<RankLaunch>> {
        return std::vector<RankLaunch>{f.Rank(0, {"ignore", "TERM", "fifo", fifo, "x", "pause"}),
                                       f.Rank(1, {"readfifo", fifo, "exit", "4"})};
      },
      config);
  CHECK(outcome.exit_code == 4);
  CHECK(outcome.records[0].exit == WorkerExit::Signaled(SIGKILL));
  CHECK(f.log_text.str().find("sent SIGKILL to 1 rank process group(s)") != std::string::npos);
}

TEST_CASE("supervisor: restart after a failure, with nothing of the old attempt alive",
          "[supervisor]") {
  Fixture f;
  const std::string ready = f.dir.File("ready");
  testing::MakeFifo(ready);
  CheckingObserver observer;
  observer.pid_file = f.dir.File("rank0.pid");
  observer.grandchild_file = f.dir.File("grandchild.pid");
  SupervisorConfig config;
  config.policy.max_restarts = 2;
  const JobOutcome outcome = f.Run(
      2,
      [&](int attempt) -> Result<std::vector<RankLaunch>> {
        if (attempt == 0) {
          // Rank 1 fails once rank 0 has forked a grandchild into its group.
          return std::vector<RankLaunch>{
              f.Rank(0, {"pidfile", observer.pid_file, "grandchild", observer.grandchild_file,
                         "fifo", ready, "x", "pause"}),
              f.Rank(1, {"readfifo", ready, "exit", "1"})};
        }
        return std::vector<RankLaunch>{f.Rank(0, {"exit", "0"}), f.Rank(1, {"exit", "0"})};
      },
      config, &observer);
  CHECK(outcome.exit_code == 0);
  CHECK(outcome.restarts == 1);
  CHECK(observer.attempts == std::vector<int>{0, 1});
  CHECK(observer.checked);
  CHECK_FALSE(observer.leftovers_seen);
  REQUIRE(outcome.records.size() == 4);
  CHECK(outcome.records[0].restart_count == 0);
  CHECK(outcome.records[3].restart_count == 1);
  CHECK(f.log_text.str().find("restarting all ranks (restart 1 of 2) after rank 1 failed with "
                              "exit code 1") != std::string::npos);
}

TEST_CASE("supervisor: restarts used up -> the failure's exit code", "[supervisor]") {
  Fixture f;
  SupervisorConfig config;
  config.policy.max_restarts = 1;
  std::vector<int> planned;
  const JobOutcome outcome = f.Run(
      1,
      [&](int attempt) -> Result<std::vector<RankLaunch>> {
        planned.push_back(attempt);
        return std::vector<RankLaunch>{f.Rank(0, {"exit", "6"})};
      },
      config);
  CHECK(outcome.exit_code == 6);
  CHECK(planned == std::vector<int>{0, 1});
}

// Keeps every JobEvent; `on_backoff` runs when a back-off begins.
struct EventRecorder : JobEvents {
  void On(const JobEvent& event) override {
    events.push_back(event);
    if (event.kind == JobEvent::Kind::kBackoff && on_backoff) on_backoff();
  }
  std::vector<JobEvent> Of(JobEvent::Kind kind) const {
    std::vector<JobEvent> out;
    for (const JobEvent& e : events) {
      if (e.kind == kind) out.push_back(e);
    }
    return out;
  }
  std::vector<JobEvent> events;
  std::function<void()> on_backoff;
};

TEST_CASE("supervisor: a crash loop backs off, and the log and events tell the wait",
          "[supervisor]") {
  Fixture f;
  EventRecorder recorder;
  SupervisorConfig config;
  config.policy.max_restarts = 3;
  config.policy.backoff = MakeBackoff(0.05, 0.1);
  config.events = &recorder;
  std::vector<int> planned;
  const JobOutcome outcome = f.Run(
      1,
      [&](int attempt) -> Result<std::vector<RankLaunch>> {
        planned.push_back(attempt);
        return std::vector<RankLaunch>{f.Rank(0, {"exit", "1"})};
      },
      config);
  CHECK(outcome.exit_code == 1);
  CHECK(planned == std::vector<int>{0, 1, 2, 3});
  const std::string log = f.log_text.str();
  INFO(log);
  CHECK(log.find("restarting all ranks (restart 1 of 3) after rank 0 failed with exit code 1 in "
                 "0.") != std::string::npos);
  CHECK(log.find("restart 1 of 3) after rank 0 failed with exit code 1 in 0.0 s; waiting") ==
        std::string::npos);  // the first restart does not wait
  CHECK(log.find("restart 2 of 3) after rank 0 failed with exit code 1 in ") != std::string::npos);
  CHECK(log.find("; waiting 0.05 s first (quick failures back off; --restart-backoff)") !=
        std::string::npos);
  CHECK(log.find("(restart 3 of 3) after rank 0 failed with exit code 1 in ") != std::string::npos);
  CHECK(log.find("; waiting 0.1 s first") != std::string::npos);
  const auto backoffs = recorder.Of(JobEvent::Kind::kBackoff);
  REQUIRE(backoffs.size() == 2);
  CHECK(backoffs[0].restarts == 2);
  CHECK(backoffs[0].backoff_s == 0.05);
  CHECK(backoffs[0].reason == "rank 0 failed with exit code 1");
  CHECK(backoffs[1].backoff_s == 0.1);
  const auto restarts = recorder.Of(JobEvent::Kind::kRestart);
  REQUIRE(restarts.size() == 3);
  CHECK(restarts[0].backoff_s == 0);
  CHECK(restarts[1].backoff_s == 0.05);
  CHECK(restarts[1].reason == "rank 0 failed with exit code 1");
  CHECK(restarts[2].backoff_s == 0.1);
  CHECK(restarts[2].duration_s >= 0.1);  // from the stop: the wait included
}

TEST_CASE("supervisor: SIGTERM during a back-off ends gculaunch at once with 143", "[supervisor]") {
  Fixture f;
  EventRecorder recorder;
  recorder.on_backoff = [&] { boost::asio::post(f.io, [] { ::raise(SIGTERM); }); };
  SupervisorConfig config;
  config.policy.max_restarts = 5;
  config.policy.backoff = MakeBackoff(3600, 3600);  // an hour: the test would time out
  config.events = &recorder;
  std::vector<int> planned;
  const JobOutcome outcome = f.Run(
      1,
      [&](int attempt) -> Result<std::vector<RankLaunch>> {
        planned.push_back(attempt);
        return std::vector<RankLaunch>{f.Rank(0, {"exit", "2"})};
      },
      config);
  CHECK(outcome.exit_code == 128 + SIGTERM);
  CHECK(planned == std::vector<int>{0, 1});  // restart 2 never starts
  CHECK(outcome.signals == std::vector<int>{SIGTERM});
  CHECK(recorder.Of(JobEvent::Kind::kBackoff).size() == 1);
  CHECK(f.log_text.str().find("waiting 3600 s first") != std::string::npos);
  CHECK(f.log_text.str().find("received SIGTERM while waiting to restart the ranks: no restart, "
                              "exiting") != std::string::npos);
}

TEST_CASE("supervisor: a teardown signal is forwarded, a second one kills", "[supervisor]") {
  Fixture f;
  const std::string ready = f.dir.File("ready");
  const std::string got_term = f.dir.File("got_term");
  testing::MakeFifo(ready);
  testing::MakeFifo(got_term);
  // Rank 0 reports SIGTERM through a FIFO and carries on; rank 1 ignores it.
  // A helper thread plays the user: SIGTERM once both ranks are ready, and
  // again once rank 0 confirmed that the first one was forwarded.
  std::thread user([&] {
    testing::ReadFifo(ready, 2);
    ::kill(::getpid(), SIGTERM);
    testing::ReadFifo(got_term);
    ::kill(::getpid(), SIGTERM);
  });
  const JobOutcome outcome = f.Run(2, [&](int) -> Result<std::vector<RankLaunch>> {
    return std::vector<RankLaunch>{
        f.Rank(0, {"record", "TERM", got_term, "fifo", ready, "a", "pause"}),
        f.Rank(1, {"ignore", "TERM", "fifo", ready, "b", "pause"})};
  });
  user.join();
  CHECK(outcome.exit_code == 128 + SIGTERM);
  CHECK(outcome.signals == std::vector<int>{SIGTERM, SIGTERM});
  CHECK(outcome.records[0].exit == WorkerExit::Signaled(SIGKILL));
  CHECK(outcome.records[1].exit == WorkerExit::Signaled(SIGKILL));
  CHECK(f.log_text.str().find("received SIGTERM during shutdown: killing every rank now") !=
        std::string::npos);
}

TEST_CASE("supervisor: SIGINT is forwarded as SIGINT and gives 130", "[supervisor]") {
  Fixture f;
  const std::string fifo = f.dir.File("ready");
  testing::MakeFifo(fifo);
  const std::string marker = f.dir.File("marker");
  boost::asio::post(f.io, [&] {
    testing::ReadFifo(fifo);
    ::raise(SIGINT);
  });
  const JobOutcome outcome = f.Run(1, [&](int) -> Result<std::vector<RankLaunch>> {
    return std::vector<RankLaunch>{
        f.Rank(0, {"trap", "INT", marker, "0", "fifo", fifo, "a", "pause"})};
  });
  CHECK(outcome.exit_code == 130);
  CHECK(testing::ReadFile(marker) == "INT\n");
  CHECK(outcome.records[0].exit == WorkerExit::Exited(0));
}

TEST_CASE("supervisor: SIGUSR1 is forwarded and stops nothing", "[supervisor]") {
  Fixture f;
  const std::string fifo = f.dir.File("ready");
  testing::MakeFifo(fifo);
  const std::string usr1 = f.dir.File("usr1");
  boost::asio::post(f.io, [&] {
    testing::ReadFifo(fifo, 2);
    ::raise(SIGUSR1);
  });
  // Each rank exits 0 on its own once USR1 reached it.
  const JobOutcome outcome = f.Run(2, [&](int) -> Result<std::vector<RankLaunch>> {
    return std::vector<RankLaunch>{
        f.Rank(0, {"trap", "USR1", usr1, "0", "fifo", fifo, "a", "pause"}),
        f.Rank(1, {"trap", "USR1", usr1, "0", "fifo", fifo, "b", "pause"})};
  });
  CHECK(outcome.exit_code == 0);
  CHECK(testing::ReadFile(usr1) == "USR1\nUSR1\n");
  CHECK(outcome.final_state.cause == StopCause::kSuccess);
}

TEST_CASE("supervisor: a rank that cannot start -> 127, the others stopped", "[supervisor]") {
  Fixture f;
  SupervisorConfig config;
  config.policy.max_restarts = 3;  // a missing program is not worth a restart
  const JobOutcome outcome = f.Run(
      2,
      [&](int) -> Result<std::vector<RankLaunch>> {
        auto bad = f.Rank(1, {});
        bad.program = f.dir.File("no-such-program");
        return std::vector<RankLaunch>{f.Rank(0, {"pause"}), bad};
      },
      config);
  CHECK(outcome.exit_code == 127);
  REQUIRE(outcome.start_error.has_value());
  CHECK(outcome.start_error->what.find("no-such-program") != std::string::npos);
  CHECK(outcome.start_error_local_rank == 1);
  CHECK(outcome.records[0].exit == WorkerExit::Signaled(SIGTERM));
}

TEST_CASE("supervisor: a planning error ends the job with 127", "[supervisor]") {
  Fixture f;
  const JobOutcome outcome = f.Run(2, [&](int) -> Result<std::vector<RankLaunch>> {
    return Error{"cannot create /x/attempt_0", "check --log-dir"};
  });
  CHECK(outcome.exit_code == 127);
  REQUIRE(outcome.start_error.has_value());
  CHECK(outcome.start_error->hint == "check --log-dir");
}

TEST_CASE("supervisor: after success, processes left in a rank's group are stopped",
          "[supervisor]") {
  Fixture f;
  const std::string grandchild = f.dir.File("grandchild");
  const JobOutcome outcome = f.Run(1, [&](int) -> Result<std::vector<RankLaunch>> {
    return std::vector<RankLaunch>{f.Rank(0, {"grandchild", grandchild, "exit", "0"})};
  });
  CHECK(outcome.exit_code == 0);
  const pid_t pid = std::stoi(testing::ReadFile(grandchild));
  CHECK_FALSE(testing::ProcessAlive(pid));
  CHECK_FALSE(sys::GroupAliveForTest(outcome.records[0].pid));
}

}  // namespace gculaunch

namespace gculaunch {
namespace {

// A JobLink that records what the Supervisor reports and answers like a job would:
// restart once after a failed attempt, then end with `final_code`.
class ScriptedJob : public JobLink {
 public:
  void LocalStop(const LocalStopReport& r) override {
    events.push_back("stop rank " + std::to_string(r.rank) + ": " + r.what);
  }
  void AttemptDrained(bool success, const AttemptReport&) override {
    events.push_back(success ? "drained ok" : "drained failed");
    if (!success && restarts_left-- > 0) {
      supervisor->JobStart(++epoch);
    } else {
      supervisor->JobExit(success ? 0 : final_code);
    }
  }
  void Finished(int exit_code) override {
    events.push_back("finished " + std::to_string(exit_code));
  }
  Supervisor* supervisor = nullptr;
  std::vector<std::string> events;
  int restarts_left = 0;
  int epoch = 0;
  int final_code = 0;
};

}  // namespace

TEST_CASE("supervisor: job mode reports to the job and restarts only on its go", "[supervisor]") {
  Fixture f;
  ScriptedJob job;
  job.restarts_left = 1;
  SupervisorConfig config;
  config.policy.nranks = 2;
  config.policy.agent_decides = true;
  FunctionPlanner planner([&](int attempt) -> Result<std::vector<RankLaunch>> {
    if (attempt == 0) {
      return std::vector<RankLaunch>{f.Rank(0, {"pause"}), f.Rank(1, {"exit", "3"})};
    }
    return std::vector<RankLaunch>{f.Rank(0, {"exit", "0"}), f.Rank(1, {"exit", "0"})};
  });
  Supervisor supervisor(WorkerGroupDeps{f.io, f.spawner, f.watcher, f.writer, f.flow, nullptr,
                                        f.out, f.err, std::chrono::milliseconds(20)},
                        f.log, config, planner, nullptr, &job);
  job.supervisor = &supervisor;
  boost::asio::post(f.io, [&] { supervisor.JobStart(0); });
  const JobOutcome outcome = supervisor.Run();
  f.io.poll();  // the posted Finished notification
  f.writer.Finish(std::chrono::seconds(10));
  CHECK(outcome.exit_code == 0);
  CHECK(outcome.restarts == 1);
  REQUIRE(outcome.records.size() == 4);
  CHECK(outcome.records[1].exit == WorkerExit::Exited(3));
  CHECK(outcome.records[0].exit == WorkerExit::Signaled(SIGTERM));
  CHECK(job.events == std::vector<std::string>{"stop rank 1: exit code 3", "drained failed",
                                               "drained ok", "finished 0"});
}

TEST_CASE("supervisor: job mode stops the ranks when the job says so", "[supervisor]") {
  Fixture f;
  ScriptedJob job;
  job.final_code = 7;
  SupervisorConfig config;
  config.policy.nranks = 2;
  config.policy.agent_decides = true;
  FunctionPlanner planner([&](int) -> Result<std::vector<RankLaunch>> {
    return std::vector<RankLaunch>{f.Rank(0, {"pause"}), f.Rank(1, {"pause"})};
  });
  Supervisor supervisor(WorkerGroupDeps{f.io, f.spawner, f.watcher, f.writer, f.flow, nullptr,
                                        f.out, f.err, std::chrono::milliseconds(20)},
                        f.log, config, planner, nullptr, &job);
  job.supervisor = &supervisor;
  boost::asio::post(f.io, [&] {
    supervisor.JobStart(0);
    supervisor.JobStop();
  });
  const JobOutcome outcome = supervisor.Run();
  f.io.poll();
  f.writer.Finish(std::chrono::seconds(10));
  CHECK(outcome.exit_code == 7);
  REQUIRE(outcome.records.size() == 2);
  for (const RankRecord& r : outcome.records) {
    CHECK(r.exit == WorkerExit::Signaled(SIGTERM));
    CHECK_FALSE(r.exited_while_running);
  }
  // Stopped by the job: no local stop is reported back.
  CHECK(job.events == std::vector<std::string>{"drained failed", "finished 7"});
}

TEST_CASE("supervisor: job mode reports a rank that exits with its own code while the job stops",
          "[supervisor]") {
  // The real cause may be this node's rank, whose report lost the race to another node's
  // marker: its code must still reach this node's output.
  Fixture f;
  ScriptedJob job;
  job.final_code = 1;
  SupervisorConfig config;
  config.policy.nranks = 2;
  config.policy.agent_decides = true;
  const std::string trapped = f.dir.File("trapped");
  const std::string ready = f.dir.File("ready");
  testing::MakeFifo(ready);
  FunctionPlanner planner([&](int) -> Result<std::vector<RankLaunch>> {
    return std::vector<RankLaunch>{
        f.Rank(0, {"trap", "TERM", trapped, "9", "fifo", ready, "x", "pause"}),
        f.Rank(1, {"pause"})};
  });
  Supervisor supervisor(f.Deps(), f.log, config, planner, nullptr, &job);
  job.supervisor = &supervisor;
  boost::asio::post(f.io, [&] { supervisor.JobStart(0); });
  // The job stops once rank 0's trap is in place.
  std::thread stopper([&] {
    testing::ReadFile(ready);
    boost::asio::post(f.io, [&] { supervisor.JobStop(); });
  });
  const JobOutcome outcome = supervisor.Run();
  stopper.join();
  f.io.poll();
  f.writer.Finish(std::chrono::seconds(10));
  CHECK(testing::ReadFile(trapped) == "TERM\n");
  CHECK(outcome.exit_code == 1);
  REQUIRE(outcome.records.size() == 2);
  CHECK(outcome.records[0].exit == WorkerExit::Exited(9));
  CHECK(outcome.records[1].exit == WorkerExit::Signaled(SIGTERM));
  const std::string log = f.log_text.str();
  CHECK_THAT(log, Catch::Contains("warning: rank 0 (local rank 0, pid " +
                                  std::to_string(outcome.records[0].pid) +
                                  ") exited with exit code 9 while the job stopped"));
  // A rank that died of the stop's own signal is not news.
  CHECK_THAT(log, !Catch::Contains("rank 1 (local rank 1"));
  CHECK(job.events == std::vector<std::string>{"drained failed", "finished 1"});
}

TEST_CASE("supervisor: job mode, a signal before the job starts ends the node at once",
          "[supervisor]") {
  Fixture f;
  ScriptedJob job;
  SupervisorConfig config;
  config.policy.agent_decides = true;
  FunctionPlanner planner([&](int) -> Result<std::vector<RankLaunch>> {
    return std::vector<RankLaunch>{f.Rank(0, {"pause"})};
  });
  Supervisor supervisor(WorkerGroupDeps{f.io, f.spawner, f.watcher, f.writer, f.flow, nullptr,
                                        f.out, f.err, std::chrono::milliseconds(20)},
                        f.log, config, planner, nullptr, &job);
  job.supervisor = &supervisor;
  boost::asio::post(f.io, [] {
    ::kill(::getpid(), SIGUSR2);
    ::kill(::getpid(), SIGTERM);
  });
  const JobOutcome outcome = supervisor.Run();
  f.io.poll();
  f.writer.Finish(std::chrono::seconds(10));
  CHECK(outcome.exit_code == 143);
  CHECK(outcome.records.empty());
  CHECK(job.events == std::vector<std::string>{"finished 143"});
}

}  // namespace gculaunch
