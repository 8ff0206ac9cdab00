#include "launcher/cluster/coordinator.h"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <thread>

#include "tests/launcher/cluster/job_fixture.h"

namespace gculaunch {
namespace {

using testing::JobFixture;

}  // namespace

TEST_CASE("coordinator: missing nodes are named every period, then the deadline ends the job",
          "[coordinator]") {
  JobFixture f(3);
  f.settings.missing_period = std::chrono::milliseconds(30);
  f.settings.rdzv_timeout = std::chrono::milliseconds(400);
  f.settings.config.rdzv_timeout_s = 0;
  f.StartCoordinator();
  f.AddNode(0, 1);
  f.AddNode(2, 1);
  REQUIRE(f.Run([&] { return f.nodes[0].agent->finished() && f.nodes[1].agent->finished(); }));
  REQUIRE(f.Run([&] { return f.coordinator->finished(); }));
  CHECK(f.log_text.str().find("info: waiting for node 1 to join (2 of 3 present)") !=
        std::string::npos);
  CHECK(f.server->Get(job::kMissingKey) ==
        std::optional<std::string>("waiting for node 1 to join (2 of 3 present)"));
  for (auto& n : f.nodes) {
    CHECK(n.ranks->calls == std::vector<std::string>{"exit 3"});
    CHECK(n.agent->exit_code() == 3);
  }
  CHECK_THAT(job::Describe(*f.nodes[1].agent->outcome()),
             Catch::StartsWith("node 1 of 3 did not join within 0 s"));
}

TEST_CASE("coordinator: a node whose connection ends without a bye is lost at once",
          "[coordinator]") {
  JobFixture f(3, /*restarts=*/0);
  // Silence would take an hour: only the connection can tell.
  f.settings.silence = job::SilenceRule::ForNodeTimeout(std::chrono::hours(1));
  f.StartCoordinator();
  for (int k = 0; k < 3; ++k) f.AddNode(k, 1);
  REQUIRE(f.Run([&] {
    return f.nodes[2].ranks->Called("start 0") && f.server->Get(job::HeartbeatKey(2, 1));
  }));
  // Node 2's gculaunch dies without a word: the kernel closes its connections.
  f.nodes[2].link->Close();
  REQUIRE(f.Run([&] {
    return f.nodes[0].agent->finished() && f.nodes[1].agent->finished() &&
           f.coordinator->finished();
  }));
  for (int k : {0, 1}) {
    CHECK(f.nodes[k].agent->exit_code() == 4);
    CHECK(job::Describe(*f.nodes[k].agent->outcome()) ==
          "node 2 (h2, 127.0.0.1) was lost: its gculaunch closed its connection without a bye "
          "(killed?)");
  }
}

TEST_CASE("coordinator: a node whose heartbeat stops is lost, the others exit 4", "[coordinator]") {
  JobFixture f(3, /*restarts=*/0);
  f.StartCoordinator();
  for (int k = 0; k < 3; ++k) f.AddNode(k, 1);
  REQUIRE(f.Run([&] { return f.nodes[2].ranks->Called("start 0"); }));
  // Node 2 hangs (its connections stay open, nothing more comes): only the heartbeat tells.
  f.nodes[2].remote->StopHeartbeat();
  REQUIRE(f.Run([&] {
    return f.nodes[0].agent->finished() && f.nodes[1].agent->finished() &&
           f.coordinator->finished();
  }));
  for (int k : {0, 1}) {
    CHECK(f.nodes[k].agent->exit_code() == 4);
    CHECK(f.nodes[k].ranks->calls == std::vector<std::string>{"start 0", "stop", "exit 4"});
    CHECK_THAT(job::Describe(*f.nodes[k].agent->outcome()),
               Catch::StartsWith("node 2 (h2, 127.0.0.1) was lost: nothing heard for "));
  }
  CHECK(f.coordinator->state().members.at(2).away);
  f.nodes[2].link->Close();
}

namespace {

// Counts node 0's heartbeat events per node: each one is a check that heard the node.
struct HeardCounter : JobEvents {
  void On(const JobEvent& event) override {
    if (event.kind == JobEvent::Kind::kHeartbeat) ++heard[event.node];
  }
  std::map<int, int> heard;
};

}  // namespace

TEST_CASE("coordinator: node 0's own stall is not the nodes' silence", "[coordinator]") {
  JobFixture f(3, /*restarts=*/0);
  HeardCounter counter;
  f.settings.events = &counter;  // silence bound: 500 ms (the fixture's --node-timeout 1 s)
  f.StartCoordinator();
  for (int k = 0; k < 3; ++k) f.AddNode(k, 1);
  REQUIRE(f.Run([&] { return f.nodes[2].ranks->Called("start 0") && counter.heard[2] > 0; }));
  // The whole process stops for five times the bound (SIGSTOP, a starved CPU): the nodes'
  // heartbeats wait in the sockets meanwhile.
  boost::asio::post(f.io, [] { std::this_thread::sleep_for(std::chrono::milliseconds(2500)); });
  const std::map<int, int> before = counter.heard;
  REQUIRE(
      f.Run([&] { return counter.heard[1] > before.at(1) && counter.heard[2] > before.at(2); }));
  for (auto& n : f.nodes) n.ranks->Succeed();
  REQUIRE(f.Run([&] {
    return f.nodes[1].agent->finished() && f.nodes[2].agent->finished() &&
           f.coordinator->finished();
  }));
  for (auto& n : f.nodes) CHECK(n.agent->exit_code() == 0);
  CHECK(f.log_text.str().find("was lost") == std::string::npos);
  CHECK_THAT(f.log_text.str(), Catch::Contains("warning: this gculaunch did not run for "));
}

TEST_CASE("coordinator: a node that stops heartbeating but keeps sending is not lost",
          "[coordinator]") {
  JobFixture f(2, /*restarts=*/0);
  f.StartCoordinator();
  for (int k = 0; k < 2; ++k) f.AddNode(k, 1);
  REQUIRE(f.Run([&] { return f.nodes[1].ranks->Called("start 0"); }));
  // Node 1's heartbeat stops, but its control connection keeps carrying other requests
  // (progress reports) for four times the bound: it is busy, not dead.
  f.nodes[1].remote->StopHeartbeat();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  boost::asio::steady_timer report(f.io);
  std::function<void()> send = [&] {
    f.nodes[1].board->PublishProgress("{}", [](const Status&) {});
    report.expires_after(std::chrono::milliseconds(50));
    report.async_wait([&](const boost::system::error_code& ec) {
      if (!ec && std::chrono::steady_clock::now() < until) send();
    });
  };
  send();
  REQUIRE(f.Run([&] { return std::chrono::steady_clock::now() >= until; }));
  CHECK_FALSE(f.nodes[0].ranks->Called("stop"));
  // Then it is silent too: lost.
  REQUIRE(f.Run([&] { return f.nodes[0].agent->finished(); }));
  CHECK(f.nodes[0].agent->exit_code() == 4);
  CHECK_THAT(job::Describe(*f.nodes[0].agent->outcome()),
             Catch::StartsWith("node 1 (h1, 127.0.0.1) was lost: nothing heard for "));
  f.nodes[1].link->Close();
}

TEST_CASE("coordinator: nodes that disagree end the job before it starts", "[coordinator]") {
  JobFixture f(2, /*max_restarts=*/1);
  f.StartCoordinator();
  f.AddNode(0, 1);
  // Node 1 runs with another --max-restarts.
  f.max_restarts = 2;
  f.AddNode(1, 1);
  REQUIRE(f.Run([&] {
    return f.nodes[0].agent->finished() && f.nodes[1].agent->finished() &&
           f.coordinator->finished();
  }));
  for (auto& n : f.nodes) {
    CHECK(n.agent->exit_code() == 2);
    CHECK_THAT(job::Describe(*n.agent->outcome()),
               Catch::Contains("allows 2 restarts but node 0 (h0, 127.0.0.1) allows 1 (fix: "
                               "give every node the same --max-restarts)"));
  }
}

TEST_CASE("coordinator: join requests numbered by a gculaunch that died do not hold nodes back",
          "[coordinator]") {
  JobFixture f(4, /*restarts=*/0);
  // One node a tick, so the second gap is found only where the first look stopped.
  f.settings.join_gap_slice = 1;
  // Nodes 1 and 3 each numbered a join request (job/joinseq) and died before writing it:
  // their next gculaunch writes request 2, and the coordinator waits for request 1.
  for (int node : {1, 3}) REQUIRE(f.server->Add(job::JoinSeqKey(node), 1).ok());
  f.StartCoordinator();
  for (int k = 0; k < 4; ++k) f.AddNode(k, 1);
  REQUIRE(f.Run([&] {
    for (auto& n : f.nodes) {
      if (!n.ranks->Called("start 0")) return false;
    }
    return true;
  }));
  CHECK(f.server->Get(job::JoinKey(1, 2)).has_value());
  CHECK(f.server->Get(job::JoinKey(3, 2)).has_value());
  CHECK_FALSE(f.server->Get(job::JoinKey(1, 1)).has_value());
  CHECK(f.RankEnv(3, 0, 0)["RANK"] == "3");
}

TEST_CASE("coordinator: a killed node rejoins as a new gculaunch and the job restarts everywhere",
          "[coordinator]") {
  JobFixture f(3, /*restarts=*/2);
  f.settings.missing_period = std::chrono::milliseconds(30);
  f.StartCoordinator();
  for (int k = 0; k < 3; ++k) f.AddNode(k, 1);
  REQUIRE(f.Run([&] {
    return f.nodes[2].ranks->Called("start 0") && f.server->Get(job::HeartbeatKey(2, 1));
  }));
  f.Kill(2);
  REQUIRE(f.Run([&] {
    return f.nodes[0].ranks->Called("stop") && f.nodes[1].ranks->Called("stop") &&
           f.log_text.str().find("waiting for node 2 (h2, 127.0.0.1) to come back") !=
               std::string::npos;
  }));
  CHECK_FALSE(f.nodes[0].agent->finished());
  CHECK(f.attempts.attempts.empty());  // nothing restarts without node 2
  f.AddNode(2, 1);                     // the pod is restarted: a new incarnation
  REQUIRE(f.Run([&] {
    return f.nodes[0].ranks->Called("start 1") && f.nodes[1].ranks->Called("start 1") &&
           f.nodes[3].ranks->Called("start 1");
  }));
  CHECK(f.attempts.attempts == std::vector<int>{1});
  CHECK(f.nodes[0].ranks->calls == std::vector<std::string>{"start 0", "stop", "start 1"});
  CHECK(f.nodes[3].ranks->calls == std::vector<std::string>{"start 1"});
  CHECK(f.RankEnv(3, 1, 0)["RANK"] == "2");
  CHECK(f.RankEnv(3, 1, 0)["TORCHELASTIC_RESTART_COUNT"] == "1");
  CHECK(f.log_text.str().find("node 2 (h2, 127.0.0.1) is back (a new gculaunch") !=
        std::string::npos);
  for (int i : {0, 1, 3}) f.nodes[i].ranks->Succeed();
  REQUIRE(f.Run([&] {
    return f.nodes[0].agent->finished() && f.nodes[1].agent->finished() &&
           f.nodes[3].agent->finished() && f.coordinator->finished();
  }));
  for (int i : {0, 1, 3}) CHECK(f.nodes[i].agent->exit_code() == 0);
}

TEST_CASE("coordinator: a lost node that does not come back ends the job at the deadline",
          "[coordinator]") {
  JobFixture f(2, /*restarts=*/1);
  f.settings.rdzv_timeout = std::chrono::milliseconds(300);
  f.settings.config.rdzv_timeout_s = 0;
  f.StartCoordinator();
  for (int k = 0; k < 2; ++k) f.AddNode(k, 1);
  REQUIRE(f.Run([&] {
    return f.nodes[1].ranks->Called("start 0") && f.server->Get(job::HeartbeatKey(1, 1));
  }));
  f.Kill(1);
  REQUIRE(f.Run([&] { return f.nodes[0].agent->finished() && f.coordinator->finished(); }));
  CHECK(f.nodes[0].ranks->calls == std::vector<std::string>{"start 0", "stop", "exit 4"});
  CHECK(job::Describe(*f.nodes[0].agent->outcome()) ==
        "node 1 (h1, 127.0.0.1) was lost: its gculaunch closed its connection without a bye "
        "(killed?); it did not come back within 0 s (--rdzv-timeout)");
}

TEST_CASE("coordinator: a stranger from another job is refused and the job goes on",
          "[coordinator]") {
  JobFixture f(2, /*restarts=*/1);
  f.StartCoordinator();
  f.AddNode(0, 1);
  f.run_id = "another-job";
  f.AddNode(1, 1);
  REQUIRE(f.Run([&] { return f.nodes[1].agent->finished(); }));
  CHECK(f.nodes[1].ranks->calls == std::vector<std::string>{"exit 2"});
  CHECK_THAT(job::Describe(*f.nodes[1].agent->outcome()),
             Catch::StartsWith("refused: node 1 (h1, 127.0.0.1) belongs to job 'another-job' but "
                               "the job at this MASTER_ADDR:MASTER_PORT is 'r'"));
  CHECK(f.nodes[0].ranks->calls.empty());  // undisturbed: still waiting for its node 1
  // A node rank this job does not have: the job's own registration refuses it before it asks
  // (the coordinator watches only ranks 0..n-1), whether stranger or misfit.
  f.nnodes = 3;
  f.AddNode(2, 1);  // still "another-job"
  f.run_id = "r";
  f.AddNode(2, 1);
  REQUIRE(f.Run([&] { return f.nodes[2].agent->finished() && f.nodes[3].agent->finished(); }));
  CHECK(f.nodes[2].agent->exit_code() == 2);
  CHECK_THAT(job::Describe(*f.nodes[2].agent->outcome()),
             Catch::StartsWith("refused: node 2 (h2, 127.0.0.1) belongs to job 'another-job'"));
  CHECK(f.nodes[3].agent->exit_code() == 2);
  CHECK_THAT(job::Describe(*f.nodes[3].agent->outcome()),
             Catch::StartsWith("refused: node 2 (h2, 127.0.0.1) expects 3 nodes but node 0 (h0, "
                               "127.0.0.1) expects 2"));
  f.nnodes = 2;
  f.AddNode(1, 1);
  REQUIRE(f.Run([&] { return f.nodes[4].ranks->Called("start 0"); }));
  f.nodes[0].ranks->Succeed();
  f.nodes[4].ranks->Succeed();
  REQUIRE(f.Run([&] { return f.coordinator->finished() && f.nodes[4].agent->finished(); }));
  CHECK(f.nodes[0].agent->exit_code() == 0);
  CHECK(f.nodes[4].agent->exit_code() == 0);
}

}  // namespace gculaunch

namespace gculaunch {
namespace {

// Whether every node of `f` started its ranks of `epoch`.
bool AllStarted(JobFixture& f, int epoch) {
  for (auto& n : f.nodes) {
    if (!n.ranks->Called("start " + std::to_string(epoch))) return false;
  }
  return true;
}

// The plan node `node` reads for `epoch` from its own key, decoded.
job::JobPlan OwnPlan(JobFixture& f, int epoch, int node) {
  auto text = f.server->Get(job::NodePlanKey(epoch, node));
  REQUIRE(text.has_value());
  auto plan = job::DecodePlan(*text);
  REQUIRE(plan.ok());
  return *plan;
}

}  // namespace

TEST_CASE("coordinator: each node reads its own plan, not the whole job's", "[coordinator]") {
  // The bytes leaving node 0 per epoch grow with the nodes, not with their square (bench.scale).
  JobFixture f(3, /*restarts=*/1);
  f.StartCoordinator();
  for (int k = 0; k < 3; ++k) f.AddNode(k, 2);
  REQUIRE(f.Run([&] { return AllStarted(f, 0); }));
  auto admission = job::DecodePlan(*f.server->Get(job::AdmitKey(2, 1)));
  REQUIRE(admission.ok());
  CHECK(admission->nnodes == 3);
  REQUIRE(admission->nodes.size() == 1);
  CHECK(admission->nodes[0].rank_offset == 4);
  f.nodes[1].ranks->Fail(3, 7);  // epoch 1 reaches the nodes that stayed through their own keys
  REQUIRE(f.Run([&] { return AllStarted(f, 1); }));
  CHECK_FALSE(f.server->Get(job::PlanKey(0)).has_value());
  CHECK_FALSE(f.server->Get(job::PlanKey(1)).has_value());
  for (int k = 0; k < 3; ++k) {
    // Epoch 1's plans are out: nobody reads epoch 0's any more, and node 0 keeps none of them.
    CHECK_FALSE(f.server->Get(job::NodePlanKey(0, k)).has_value());
    const job::JobPlan own = OwnPlan(f, 1, k);
    CHECK(own.epoch == 1);
    CHECK(own.nnodes == 3);
    CHECK(own.world_size == 6);
    CHECK(own.leader_addr == "127.0.0.1");
    REQUIRE(own.nodes.size() == 1);
    CHECK(own.nodes[0].node_rank == k);
    CHECK(own.nodes[0].rank_offset == 2 * k);
  }
  auto env = f.RankEnv(2, 1, 1);
  CHECK(env["RANK"] == "5");
  CHECK(env["WORLD_SIZE"] == "6");
  CHECK(env["GROUP_RANK"] == "2");
  CHECK(env["GROUP_WORLD_SIZE"] == "3");
}

TEST_CASE("coordinator: the rendezvous line names the first 32 nodes, then counts the rest",
          "[coordinator]") {
  JobFixture f(34, /*restarts=*/0);
  f.StartCoordinator();
  for (int k = 0; k < 34; ++k) f.AddNode(k, 1);
  REQUIRE(f.Run([&] { return AllStarted(f, 0); }));
  const std::string log = f.log_text.str();
  CHECK_THAT(log, Catch::Contains(", node 31 (h31, 127.0.0.1) x1 and 2 more\n"));
  CHECK_THAT(log, !Catch::Contains("node 32 (h32"));
}

TEST_CASE("coordinator: a node of a gculaunch before per-node plans still reads the whole plan",
          "[coordinator]") {
  JobFixture f(3, /*restarts=*/1);
  f.older = {1};
  f.StartCoordinator();
  for (int k = 0; k < 3; ++k) f.AddNode(k, 2);
  REQUIRE(f.Run([&] { return AllStarted(f, 0); }));
  // Its admission is the whole plan, which an older agent can read.
  auto admission = job::DecodePlan(*f.server->Get(job::AdmitKey(1, 1)));
  REQUIRE(admission.ok());
  CHECK(admission->nnodes == 0);
  CHECK(admission->nodes.size() == 3);
  f.nodes[2].ranks->Fail(5, 7);
  REQUIRE(f.Run([&] { return AllStarted(f, 1); }));
  auto whole = job::DecodePlan(*f.server->Get(job::PlanKey(1)));
  REQUIRE(whole.ok());
  CHECK(whole->nodes.size() == 3);
  CHECK_FALSE(f.server->Get(job::NodePlanKey(1, 1)).has_value());
  CHECK(OwnPlan(f, 1, 2).nodes.size() == 1);
  CHECK(f.RankEnv(1, 1, 0)["RANK"] == "2");
  CHECK(f.RankEnv(1, 1, 0)["GROUP_WORLD_SIZE"] == "3");
}

TEST_CASE("coordinator: nodes behind store proxies reach node 0 over one connection each",
          "[coordinator][proxy]") {
  // --store-proxy: the agent's two connections ride its node's proxy upstream, so node 0
  // holds one socket per node (bench.scale: 16384 nodes under a 20,000-file limit).
  JobFixture f(3, /*restarts=*/1);
  f.proxied = {1, 2};
  f.StartCoordinator();
  for (int k = 0; k < 3; ++k) f.AddNode(k, 2);
  REQUIRE(f.Run([&] { return AllStarted(f, 0); }));
  CHECK(f.server->num_sessions() == 2);
  CHECK(f.log_text.str().find(
            "connected to the master node at 127.0.0.1:" + std::to_string(f.server->port()) +
            " through this node's store proxy") != std::string::npos);
  CHECK(f.RankEnv(2, 0, 1)["RANK"] == "5");
  // A rank fails: the restart reaches both proxied nodes.
  f.nodes[1].ranks->Fail(2, 7);
  REQUIRE(f.Run([&] { return AllStarted(f, 1); }));
  // Node 2's gculaunch dies with its proxy: node 0 hears it from the upstream's end.
  REQUIRE(f.Run([&] { return f.server->Get(job::HeartbeatKey(2, 1)).has_value(); }));
  f.Kill(2);
  REQUIRE(f.Run([&] { return f.nodes[0].agent->finished() && f.coordinator->finished(); }));
  CHECK_THAT(job::Describe(*f.nodes[0].agent->outcome()),
             Catch::Contains("node 2 (h2, 127.0.0.1) was lost: its gculaunch closed its "
                             "connection without a bye (killed?)"));
  CHECK(f.server->num_sessions() <= 1);
}

}  // namespace gculaunch
