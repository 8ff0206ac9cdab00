#include "launcher/ops/status_model.h"

#include <catch2/catch.hpp>

namespace gculaunch {

TEST_CASE("the status follows ranks across a restart", "[status_model]") {
  double now = 100;
  JobStatus status([&] { return now; });
  status.On(JobEvent::Launch({{"run_id", "r1"}, {"nproc_per_node", 2}, {"max_restarts", 1}}));
  status.On(JobEvent::RankStart(0, 0, 0, 11));
  status.On(JobEvent::RankStart(0, 1, 1, 12));
  CHECK(status.snapshot().RanksRunning() == 2);
  now = 105;
  status.On(JobEvent::RankExit(0, 1, 1, 12, WorkerExit::Exited(7)));
  status.On(JobEvent::RankExit(0, 0, 0, 11, WorkerExit::Signaled(15)));
  CHECK(status.snapshot().RanksRunning() == 0);
  status.On(JobEvent::Restart(1, 1, "rank 1 failed", 0.25));
  status.On(JobEvent::RankStart(1, 0, 0, 21));
  status.On(JobEvent::RankStart(1, 1, 1, 22));
  const JobSnapshot& s = status.snapshot();
  CHECK(s.run_id == "r1");
  CHECK(s.epoch == 1);
  CHECK(s.restarts == 1);
  REQUIRE(s.ranks.size() == 2);
  CHECK(s.ranks[0].pid == 21);
  CHECK(s.ranks[0].start_time == 105);
  CHECK(s.exits_by_code == std::map<int, int>{{7, 1}, {143, 1}});
  CHECK(s.restart_durations.count == 1);
  CHECK(s.restart_durations.last_s == 0.25);
}

TEST_CASE("the status follows nodes lost and back", "[status_model]") {
  double now = 0;
  JobStatus status([&] { return now; });
  status.On(JobEvent::NodeJoin(0, "a", "10.0.0.1"));
  status.On(JobEvent::NodeJoin(1, "b", "10.0.0.2"));
  now = 3;
  status.On(JobEvent::Heartbeat(1));
  CHECK(status.snapshot().nodes.at(1).last_heartbeat == 3);
  status.On(JobEvent::NodeLoss(1, "no heartbeat for 3.0 s"));
  CHECK(status.snapshot().NodesPresent() == 1);
  CHECK(status.snapshot().NodesLost() == 1);
  status.On(JobEvent::NodeReturn(1, "10.0.0.9"));
  CHECK(status.snapshot().NodesLost() == 0);
  CHECK(status.snapshot().nodes.at(1).addr == "10.0.0.9");
  CHECK(status.snapshot().node_losses == 1);
}

}  // namespace gculaunch
