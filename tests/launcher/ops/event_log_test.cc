#include "launcher/ops/event_log.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/support/test_util.h"

namespace gculaunch {

namespace {

class Recorder : public JobEvents {
 public:
  void On(const JobEvent& e) override { kinds.push_back(e.kind); }
  std::vector<JobEvent::Kind> kinds;
};

}  // namespace

TEST_CASE("an event line starts with the schema, the time and the event", "[event_log]") {
  const std::string line =
      FormatEventLine(JobEvent::RankStart(2, 5, 1, 4242), 1764000000.25, "job7", 1);
  CHECK(line ==
        R"({"schema":1,"ts":1764000000.25,"time":"2025-11-24T16:00:00.250Z","event":"rank_start",)"
        R"("run_id":"job7","node_rank":1,"epoch":2,"local_rank":1,"pid":4242,"rank":5})");
}

TEST_CASE("a rank exit carries its exit code or its signal", "[event_log]") {
  auto code = nlohmann::json::parse(
      FormatEventLine(JobEvent::RankExit(0, 1, 1, 10, WorkerExit::Exited(7)), 1, "r", 0));
  CHECK(code["event"] == "rank_exit");
  CHECK(code["exit_code"] == 7);
  CHECK(code["signal"].is_null());
  CHECK(code["shell_code"] == 7);
  auto sig = nlohmann::json::parse(
      FormatEventLine(JobEvent::RankExit(0, 1, 1, 10, WorkerExit::Signaled(9)), 1, "r", 0));
  CHECK(sig["exit_code"].is_null());
  CHECK(sig["signal"] == "SIGKILL");
  CHECK(sig["shell_code"] == 137);
}

TEST_CASE("every event has its documented fields", "[event_log]") {
  auto line = [](const JobEvent& e) {
    return nlohmann::json::parse(FormatEventLine(e, 1, "r", 0));
  };
  auto restart = line(JobEvent::Restart(1, 3, "rank 1 failed with exit code 7", 0.5));
  CHECK(restart["event"] == "restart");
  CHECK(restart["restarts_used"] == 1);
  CHECK(restart["max_restarts"] == 3);
  CHECK(restart["since_stop_s"] == 0.5);
  CHECK(restart["reason"] == "rank 1 failed with exit code 7");
  auto rdzv = line(JobEvent::Rendezvous(0, 2, 4, 1.2345));
  CHECK(rdzv["event"] == "rendezvous_complete");
  CHECK(rdzv["duration_s"] == 1.235);
  CHECK(rdzv["nodes"] == 2);
  CHECK(rdzv["world_size"] == 4);
  CHECK(line(JobEvent::NodeJoin(1, "hostb", "10.0.0.2"))["addr"] == "10.0.0.2");
  CHECK(line(JobEvent::NodeLoss(1, "no heartbeat"))["event"] == "node_loss");
  CHECK(line(JobEvent::NodeReturn(1, "10.0.0.3"))["event"] == "node_return");
  auto hang = line(JobEvent::Hang(2, 3.0, 3.14159, "restart", {1, 5}, "no progress"));
  CHECK(hang["event"] == "hang");
  CHECK(hang["epoch"] == 2);
  CHECK(hang["timeout_s"] == 3.0);
  CHECK(hang["silent_s"] == 3.142);
  CHECK(hang["action"] == "restart");
  CHECK(hang["odd_ranks"] == nlohmann::json::array({1, 5}));
  CHECK(hang["reason"] == "no progress");
  auto unhealthy = line(JobEvent::Unhealthy(1, {"3"}, "nvidia-smi: card 3: uncorrectable ECC"));
  CHECK(unhealthy["event"] == "node_unhealthy");
  CHECK(unhealthy["epoch"] == 1);
  CHECK(unhealthy["cards"] == nlohmann::json::array({"3"}));
  CHECK(unhealthy["reason"] == "nvidia-smi: card 3: uncorrectable ECC");
  auto memory = line(JobEvent::DeviceMemoryWait(2, 1.25, false, {"1"}, "card 1: 3000 MiB"));
  CHECK(memory["event"] == "device_memory_wait");
  CHECK(memory["epoch"] == 2);
  CHECK(memory["waited_s"] == 1.25);
  CHECK(memory["freed"] == false);
  CHECK(memory["cards"] == nlohmann::json::array({"1"}));
  CHECK(memory["held"] == "card 1: 3000 MiB");
  auto stop = line(JobEvent::Stop(7, Outcome::kRankFailed, 7));
  CHECK(stop["exit_code"] == 7);
  CHECK(stop["reason"] == "rank_failed");
  auto launch = line(JobEvent::Launch({{"nnodes", 2}, {"event", "not this"}}));
  CHECK(launch["event"] == "launch");  // the head wins over a field of the same name
  CHECK(launch["nnodes"] == 2);
}

TEST_CASE("the event log appends one line per event, heartbeats left out", "[event_log]") {
  testing::TempDir dir;
  auto held = sys::HeldDir::Open(dir.path());
  REQUIRE(held.ok());
  auto log = EventLog::Open(*held, "events.jsonl", "run1", 0);
  REQUIRE(log.ok());
  (*log)->On(JobEvent::Launch({{"nnodes", 1}}));
  (*log)->On(JobEvent::Heartbeat(1));
  (*log)->On(JobEvent::Stop(0, Outcome::kSuccess, 0));
  CHECK((*log)->write_errors() == 0);
  const std::string text = testing::ReadFile(dir.File("events.jsonl"));
  std::vector<std::string> events;
  std::size_t begin = 0;
  for (std::size_t end; (end = text.find('\n', begin)) != std::string::npos; begin = end + 1) {
    events.push_back(nlohmann::json::parse(text.substr(begin, end - begin))["event"]);
  }
  CHECK(begin == text.size());
  CHECK(events == std::vector<std::string>{"launch", "stop"});
}

TEST_CASE("the event log names the file it cannot open", "[event_log]") {
  testing::TempDir dir;
  std::filesystem::create_directory(dir.File("events.jsonl"));  // a directory in its place
  auto held = sys::HeldDir::Open(dir.path());
  REQUIRE(held.ok());
  auto log = EventLog::Open(*held, "events.jsonl", "run1", 0);
  REQUIRE(!log.ok());
  CHECK(log.error().what ==
        "the event log: cannot open " + dir.path() + "/events.jsonl: Is a directory");
}

TEST_CASE("a hub tells every listener, NoJobEvents ignores", "[event_log]") {
  Recorder a, b;
  JobEventHub hub;
  hub.Add(&a);
  hub.Add(nullptr);
  hub.Add(&b);
  hub.On(JobEvent::NodeLoss(1, "x"));
  CHECK(a.kinds == std::vector<JobEvent::Kind>{JobEvent::Kind::kNodeLoss});
  CHECK(b.kinds == a.kinds);
  NoJobEvents()->On(JobEvent::Stop(0, Outcome::kSuccess, 0));
}

TEST_CASE("the restart back-off is in the events", "[event_log]") {
  auto backoff =
      nlohmann::json::parse(FormatEventLine(JobEvent::Backoff(3, 2, "rank 0 failed"), 1, "r", 0));
  CHECK(backoff["event"] == "restart_backoff");
  CHECK(backoff["epoch"] == 3);
  CHECK(backoff["restarts_used"] == 3);
  CHECK(backoff["backoff_s"] == 2.0);
  CHECK(backoff["reason"] == "rank 0 failed");
  JobEvent restart = JobEvent::Restart(3, 9, "rank 0 failed", 2.25);
  restart.backoff_s = 2;
  auto line = nlohmann::json::parse(FormatEventLine(restart, 1, "r", 0));
  CHECK(line["backoff_s"] == 2.0);
  CHECK(line["since_stop_s"] == 2.25);
  auto plain = nlohmann::json::parse(FormatEventLine(JobEvent::Restart(1, 9, "x", 0.1), 1, "r", 0));
  CHECK(plain["backoff_s"] == 0.0);
}

}  // namespace gculaunch
