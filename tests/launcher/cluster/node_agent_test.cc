#include "launcher/cluster/node_agent.h"

#include <catch2/catch.hpp>

#include "tests/launcher/cluster/job_fixture.h"

namespace gculaunch {
namespace {

using testing::JobFixture;

}  // namespace

TEST_CASE("node agent: two nodes join, restart together after a failure, then succeed",
          "[node_agent]") {
  JobFixture f(2, /*max_restarts=*/1);
  f.StartCoordinator();
  f.AddNode(0, 1);
  f.AddNode(1, 2);
  auto& n0 = f.nodes[0];
  auto& n1 = f.nodes[1];
  REQUIRE(f.Run([&] { return n0.ranks->Called("start 0") && n1.ranks->Called("start 0"); }));
  // Global ranks in node-rank order; heterogeneous nproc; MASTER_PORT = the agent store's.
  CHECK(f.RankEnv(0, 0, 0)["RANK"] == "0");
  CHECK(f.RankEnv(1, 0, 0)["RANK"] == "1");
  CHECK(f.RankEnv(1, 0, 1)["RANK"] == "2");
  CHECK(f.RankEnv(1, 0, 1)["WORLD_SIZE"] == "3");
  CHECK(f.RankEnv(1, 0, 1)["MASTER_PORT"] == std::to_string(f.server->port()));
  CHECK(f.log_text.str().find("node 1 (h1, 127.0.0.1) x2") != std::string::npos);

  // Rank 2 on node 1 fails: node 0 is told to stop; the store's key space changes only
  // after both nodes reaped; both start epoch 1.
  n1.ranks->Fail(2, 7);
  REQUIRE(f.Run([&] { return n0.ranks->Called("start 1") && n1.ranks->Called("start 1"); }));
  CHECK(n0.ranks->calls == std::vector<std::string>{"start 0", "stop", "start 1"});
  CHECK(n1.ranks->calls == std::vector<std::string>{"start 0", "start 1"});
  CHECK(f.attempts.attempts == std::vector<int>{1});
  CHECK(f.RankEnv(1, 1, 0)["TORCHELASTIC_RESTART_COUNT"] == "1");
  CHECK(f.log_text.str().find("rank 2 (local rank 0) on node 1 (h1, 127.0.0.1) failed with exit "
                              "code 7; every node restarts its ranks (restart 1 of 1)") !=
        std::string::npos);

  n0.ranks->Succeed();
  n1.ranks->Succeed();
  REQUIRE(f.Run(
      [&] { return n0.agent->finished() && n1.agent->finished() && f.coordinator->finished(); }));
  CHECK(n0.ranks->calls.back() == "exit 0");
  CHECK(n1.ranks->calls.back() == "exit 0");
  CHECK(n0.agent->exit_code() == 0);
  CHECK(n1.agent->exit_code() == 0);
  REQUIRE(n1.agent->outcome().has_value());
  CHECK(n1.agent->outcome()->kind == job::StopMarker::Kind::kSuccess);
  CHECK(f.server->Get(job::ByeKey(1, 1)) == std::optional<std::string>("0"));
}

TEST_CASE("node agent: a failure without restarts ends every node with the rank's code",
          "[node_agent]") {
  JobFixture f(3, /*max_restarts=*/0);
  f.StartCoordinator();
  for (int k = 0; k < 3; ++k) f.AddNode(k, 1);
  REQUIRE(f.Run([&] {
    for (auto& n : f.nodes) {
      if (!n.ranks->Called("start 0")) return false;
    }
    return true;
  }));
  f.nodes[2].ranks->Succeed();  // node 2 finished first: it waits for the others
  f.nodes[0].ranks->Fail(0, 13);
  REQUIRE(f.Run([&] {
    for (auto& n : f.nodes) {
      if (!n.agent->finished()) return false;
    }
    return f.coordinator->finished();
  }));
  for (auto& n : f.nodes) {
    CHECK(n.agent->exit_code() == 13);
    CHECK(n.ranks->calls.back() == "exit 13");
    REQUIRE(n.agent->outcome().has_value());
    CHECK(job::Describe(*n.agent->outcome()) ==
          "rank 0 (local rank 0) on node 0 (h0, 127.0.0.1) failed with exit code 13");
  }
  CHECK(f.nodes[1].ranks->calls == std::vector<std::string>{"start 0", "stop", "exit 13"});
  CHECK(f.nodes[2].ranks->calls == std::vector<std::string>{"start 0", "exit 13"});
  CHECK(f.attempts.attempts.empty());
}

TEST_CASE("node agent: a node rank that is already taken is refused with exit 2", "[node_agent]") {
  JobFixture f(2);
  f.StartCoordinator();
  f.AddNode(0, 1);
  f.AddNode(1, 1);
  REQUIRE(f.Run([&] { return f.nodes[1].ranks->Called("start 0"); }));
  f.AddNode(2, 1, /*registered_as=*/1);  // a second node claiming rank 1
  const bool finished =
      f.Run([&] { return f.nodes[2].agent->finished(); }, std::chrono::seconds(5));
  INFO(f.log_text.str());
  REQUIRE(finished);
  CHECK(f.nodes[2].ranks->calls == std::vector<std::string>{"exit 2"});
  REQUIRE(f.nodes[2].agent->outcome().has_value());
  CHECK_THAT(job::Describe(*f.nodes[2].agent->outcome()),
             Catch::StartsWith("refused: node rank 1 is already taken by node 1 (h1, 127.0.0.1) "
                               "(pid 1001) (fix: give every node a distinct node rank"));
  CHECK(f.nodes[1].ranks->calls == std::vector<std::string>{"start 0"});  // undisturbed
}

TEST_CASE("node agent: a worker notices the master's store go away and exits 4", "[node_agent]") {
  JobFixture f(2, /*restarts=*/0);
  f.StartCoordinator();
  f.AddNode(0, 1);
  f.AddNode(1, 1);
  REQUIRE(f.Run([&] { return f.nodes[1].ranks->Called("start 0"); }));
  f.server->Stop();  // node 0's gculaunch is gone
  REQUIRE(f.Run([&] { return f.nodes[1].agent->finished(); }));
  CHECK(f.nodes[1].ranks->calls == std::vector<std::string>{"start 0", "stop", "exit 4"});
  REQUIRE(f.nodes[1].agent->outcome().has_value());
  CHECK_THAT(job::Describe(*f.nodes[1].agent->outcome()),
             Catch::StartsWith("node 0 (127.0.0.1) was lost: the connection to its gculaunch at "
                               "127.0.0.1:"));
}

}  // namespace gculaunch
