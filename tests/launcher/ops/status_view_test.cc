#include "launcher/ops/status_view.h"

#include <catch2/catch.hpp>
#include <sstream>
#include <vector>

namespace gculaunch {

TEST_CASE("status JSON lists ranks with their samples and node 0's nodes", "[status_view]") {
  double now = 100;
  JobStatus status([&] { return now; });
  status.On(JobEvent::Launch({{"run_id", "r1"},
                              {"node_rank", 0},
                              {"nnodes", 2},
                              {"max_restarts", 3},
                              {"layout", "layout: 2 nodes x 2 ranks"},
                              {"pid", 77},
                              {"host", "h0"}}));
  status.On(JobEvent::NodeJoin(0, "h0", "10.0.0.1"));
  status.On(JobEvent::NodeJoin(1, "h1", "10.0.0.2"));
  status.On(JobEvent::RankStart(0, 0, 0, 11));
  status.On(JobEvent::RankStart(0, 1, 1, 12));
  now = 104;
  status.On(JobEvent::Heartbeat(1));
  status.On(JobEvent::RankExit(0, 1, 1, 12, WorkerExit::Signaled(9)));
  now = 110;
  StatusInput in;
  in.job = &status.snapshot();
  in.now = now;
  sys::ProcSample p;
  p.alive = true;
  p.state = 'S';
  p.cpu_s = 2;
  p.rss_bytes = 1 << 20;
  p.uptime_s = 10;
  in.procs[11] = p;
  in.progress_age_s[0] = 1.5;
  const nlohmann::json j = StatusJson(in);
  CHECK(j["schema"] == 1);
  CHECK(j["run_id"] == "r1");
  CHECK(j["pid"] == 77);
  CHECK(j["epoch"] == 0);
  CHECK(j["restarts_used"] == 0);
  CHECK(j["max_restarts"] == 3);
  CHECK(j["uptime_s"] == 10.0);
  REQUIRE(j["ranks"].size() == 2);
  const auto& r0 = j["ranks"][0];
  CHECK(r0["pid"] == 11);
  CHECK(r0["state"] == "running");
  CHECK(r0["cpu_percent"] == 20.0);
  CHECK(r0["rss_bytes"] == 1 << 20);
  CHECK(r0["uptime_s"] == 10.0);
  CHECK(r0["last_progress_s"] == 1.5);
  const auto& r1 = j["ranks"][1];
  CHECK(r1["state"] == "exited");
  CHECK(r1["signal"] == "SIGKILL");
  CHECK(r1["uptime_s"] == 4.0);
  CHECK(r1["cpu_s"].is_null());
  REQUIRE(j["nodes"].size() == 2);
  CHECK(j["nodes"][1]["addr"] == "10.0.0.2");
  CHECK(j["nodes"][1]["last_heartbeat_s"] == 6.0);
  CHECK(j["nodes"][0]["last_heartbeat_s"].is_null());

  const std::string text = StatusText(j);
  CHECK(text.find("run r1, node 0 of 2 (h0), gculaunch pid 77, up 10.0 s\n") == 0);
  CHECK(text.find("epoch 0, restarts used 0 of 3\n") != std::string::npos);
  // The columns are padded to their widest cell: compare the words of rank 0's line.
  const auto line = text.find("\n0 ");
  REQUIRE(line != std::string::npos);
  std::istringstream row(text.substr(line + 1, text.find('\n', line + 1) - line - 1));
  std::vector<std::string> words;
  for (std::string w; row >> w;) words.push_back(w);
  CHECK(words ==
        std::vector<std::string>{"0", "0", "11", "running", "20.0", "2.00", "1.0", "10.0", "1.5"});
  CHECK(text.find("exited SIGKILL") != std::string::npos);
  CHECK(text.find("nodes:\nNODE  ADDR      HOST  STATE    LAST_HEARTBEAT_S\n") !=
        std::string::npos);
}

TEST_CASE("status shows the readiness /readyz answers", "[status_view]") {
  JobStatus status([] { return 10.0; });
  status.On(JobEvent::Launch({{"run_id", "r"}, {"nproc_per_node", 1}}));
  StatusInput in;
  in.job = &status.snapshot();
  in.now = 10;
  CHECK(StatusJson(in)["ready"].is_null());
  in.readiness = Readiness{false, "the ranks are starting"};
  const nlohmann::json doc = StatusJson(in);
  CHECK(doc["ready"] == false);
  CHECK(doc["ready_reason"] == "the ranks are starting");
  CHECK_THAT(StatusText(doc), Catch::Contains("\nnot ready: the ranks are starting\n"));
  in.readiness = Readiness{true, "1 local rank of epoch 0 running"};
  CHECK_THAT(StatusText(StatusJson(in)),
             Catch::Contains("\nready: 1 local rank of epoch 0 running\n"));
}

TEST_CASE("status text of a document with missing fields shows dashes", "[status_view]") {
  const std::string text = StatusText(nlohmann::json::object());
  CHECK(text.find("run -, node - of -") == 0);
}

TEST_CASE("status tells a back-off under way, and forgets it at the restart", "[status_view]") {
  double now = 100;
  JobStatus status([&] { return now; });
  status.On(JobEvent::Launch({{"run_id", "r"}, {"max_restarts", 9}}));
  status.On(JobEvent::RankStart(1, 0, 0, 11));
  status.On(JobEvent::RankExit(1, 0, 0, 11, WorkerExit::Exited(1)));
  StatusInput in;
  in.job = &status.snapshot();
  in.now = now;
  CHECK(StatusJson(in)["restart_backoff_s"].is_null());
  CHECK(StatusJson(in)["next_restart_in_s"].is_null());
  status.On(JobEvent::Backoff(2, 4, "rank 0 failed with exit code 1"));
  now = in.now = 101.5;
  const nlohmann::json waiting = StatusJson(in);
  CHECK(waiting["restart_backoff_s"] == 4.0);
  CHECK(waiting["next_restart_in_s"] == 2.5);
  CHECK(StatusText(waiting).find("restarts used 0 of 9; next restart in 2.5 s (backing off 4.0 s: "
                                 "--restart-backoff)\n") != std::string::npos);
  JobEvent restart = JobEvent::Restart(2, 9, "rank 0 failed with exit code 1", 4.1);
  restart.backoff_s = 4;
  status.On(restart);
  const nlohmann::json after = StatusJson(in);
  CHECK(after["restart_backoff_s"].is_null());
  CHECK(after["next_restart_in_s"].is_null());
  CHECK(StatusText(after).find("next restart") == std::string::npos);
}

TEST_CASE("status lists the standbys of --warm-ranks with their PSS", "[status_view]") {
  JobStatus status([] { return 10.0; });
  status.On(JobEvent::Launch({{"run_id", "w1"}, {"node_rank", 0}, {"nnodes", 1}}));
  StatusInput in;
  in.job = &status.snapshot();
  in.now = 10;
  in.standbys = {{0, 501, true, 300u * 1024 * 1024}, {1, 502, false, std::nullopt}};
  const nlohmann::json doc = StatusJson(in);
  REQUIRE(doc["standbys"].size() == 2);
  CHECK(doc["standbys"][0] == nlohmann::json{{"local_rank", 0},
                                             {"pid", 501},
                                             {"state", "ready"},
                                             {"pss_bytes", 300u * 1024 * 1024}});
  CHECK(doc["standbys"][1]["state"] == "importing");
  CHECK(doc["standbys"][1]["pss_bytes"].is_null());
  const std::string text = StatusText(doc);
  CHECK_THAT(text, Catch::Contains("standbys (--warm-ranks):"));
  CHECK_THAT(text, Catch::Contains("ready"));
  CHECK_THAT(text, Catch::Contains("300"));
  // Without --warm-ranks: an empty list and no table.
  in.standbys.clear();
  CHECK(StatusJson(in)["standbys"].empty());
  CHECK_THAT(StatusText(StatusJson(in)), !Catch::Contains("standbys"));
}

}  // namespace gculaunch
