#include "launcher/cluster/job_policy.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace gculaunch::job {
namespace {

// ---------------------------------- agent ----------------------------------

JobPlan Plan(int epoch) {
  std::vector<NodeRegistration> regs(2);
  regs[0].node_rank = 0;
  regs[0].nproc = 1;
  regs[1].node_rank = 1;
  regs[1].nproc = 2;
  return MakePlan(regs, epoch, 0);
}

StopMarker Marker(StopMarker::Kind kind, int epoch, int node, int code = 0) {
  StopMarker m;
  m.kind = kind;
  m.epoch = epoch;
  m.node = node;
  m.exit_code = code;
  m.restartable = kind == StopMarker::Kind::kRankFailed;
  if (kind == StopMarker::Kind::kRankFailed) m.rank = 2;
  return m;
}

LocalStopReport RankFailed(int code) {
  LocalStopReport r;
  r.cause = StopCause::kRankFailed;
  r.rank = 2;
  r.local_rank = 1;
  r.exit_code = code;
  r.what = "exit code " + std::to_string(code);
  return r;
}

LocalStopReport Signalled(int sig) {
  LocalStopReport r;
  r.cause = StopCause::kSignal;
  r.exit_code = 128 + sig;
  r.what = "its gculaunch received SIGTERM";
  return r;
}

using K = StopMarker::Kind;
using AE = AgentEvent;

struct AgentRow {
  std::string name;
  int max_restarts;
  std::vector<std::pair<AgentEvent, std::vector<std::string>>> steps;
  AgentState::Phase final_phase;
  int final_exit_code;
};

std::vector<std::string> Names(const std::vector<AgentAction>& actions) {
  std::vector<std::string> out;
  for (const auto& a : actions) out.push_back(ActionName(a));
  return out;
}

const std::vector<std::string> kNothing;

}  // namespace

TEST_CASE("job policy: the agent's table of event sequences", "[job_policy]") {
  using P = AgentState::Phase;
  const std::vector<std::string> kStart0 = {"StartRanks(0)", "WatchMarker(0)"};
  const std::vector<std::string> kStart1 = {"StartRanks(1)", "WatchMarker(1)"};
  const std::vector<AgentRow> rows = {
      {"every node succeeds: done reported, exit 0 on the success marker",
       0,
       {{AE::Joined(), {"WaitPlan(0)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::Drained(true), {"ReportDone(0)"}},
        {AE::Marker(Marker(K::kSuccess, 0, -1)), {"ExitRanks(0)"}},
        {AE::SupervisorFinished(0), {"SayBye(0)", "Finish(0)"}}},
       P::kDone,
       0},
      {"a local failure is published, the job restarts, then succeeds",
       1,
       {{AE::Joined(), {"WaitPlan(0)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::LocalStop(RankFailed(7)), {"PublishMarker(0)[rank_failed]"}},
        {AE::Marker(Marker(K::kRankFailed, 0, 1, 7)), kNothing},  // already stopping
        {AE::Drained(false), {"ReportReaped(0)", "WaitPlan(1)"}},
        {AE::Plan(Plan(1)), kStart1},
        {AE::Drained(true), {"ReportDone(1)"}},
        {AE::Marker(Marker(K::kSuccess, 1, -1)), {"ExitRanks(0)"}},
        {AE::SupervisorFinished(0), {"SayBye(0)", "Finish(0)"}}},
       P::kDone,
       0},
      {"another node's failure without restarts: stop, then that rank's code",
       0,
       {{AE::Joined(), {"WaitPlan(0)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::Marker(Marker(K::kRankFailed, 0, 0, 7)), {"StopRanks(0)"}},
        {AE::LocalStop(RankFailed(1)), kNothing},  // a consequence: never published
        {AE::Drained(false), {"ExitRanks(7)"}},
        {AE::SupervisorFinished(7), {"SayBye(7)", "Finish(7)"}}},
       P::kDone,
       7},
      {"the marker may arrive after the drain",
       1,
       {{AE::Joined(), {"WaitPlan(0)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::LocalStop(RankFailed(3)), {"PublishMarker(0)[rank_failed]"}},
        {AE::Drained(false), kNothing},
        {AE::Marker(Marker(K::kRankFailed, 0, 1, 3)), {"ReportReaped(0)", "WaitPlan(1)"}}},
       P::kWaitingPlan,
       -1},
      {"the restart budget is job-wide: a failure in epoch 1 ends a 1-restart job",
       1,
       {{AE::Joined(), {"WaitPlan(0)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::Marker(Marker(K::kRankFailed, 0, 0, 5)), {"StopRanks(0)"}},
        {AE::Drained(false), {"ReportReaped(0)", "WaitPlan(1)"}},
        {AE::Plan(Plan(1)), kStart1},
        {AE::Marker(Marker(K::kRankFailed, 1, 0, 6)), {"StopRanks(1)"}},
        {AE::Drained(false), {"ExitRanks(6)"}}},
       P::kLeaving,
       6},
      {"a teardown signal: the node publishes that it leaves and keeps 128+S",
       1,
       {{AE::Joined(), {"WaitPlan(0)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::LocalStop(Signalled(15)), {"PublishMarker(0)[node_left]"}},
        {AE::Marker(Marker(K::kNodeLeft, 0, 1, 143)), kNothing},
        {AE::SupervisorFinished(143), {"SayBye(143)", "Finish(143)"}}},
       P::kDone,
       143},
      {"a signalled node leaves even when another node's restartable failure won",
       1,
       {{AE::Joined(), {"WaitPlan(0)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::LocalStop(Signalled(2)), {"PublishMarker(0)[node_left]"}},
        {AE::Marker(Marker(K::kRankFailed, 0, 0, 1)), kNothing},
        {AE::Drained(false), {"ExitRanks(130)"}}},
       P::kLeaving,
       130},
      {"another node lost: stop, exit 4",
       1,
       {{AE::Joined(), {"WaitPlan(0)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::Marker(Marker(K::kNodeLost, 0, 2)), {"StopRanks(0)"}},
        {AE::Drained(false), {"ExitRanks(4)"}}},
       P::kLeaving,
       4},
      {"the master lost while the ranks run: stop, exit 4",
       1,
       {{AE::Joined(), {"WaitPlan(0)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::MasterLost("EOF"), {"StopRanks(0)"}},
        {AE::Drained(false), {"ExitRanks(4)"}},
        {AE::MasterLost("again"), kNothing}},
       P::kLeaving,
       4},
      {"the master lost while waiting for the next epoch: exit 4 at once",
       1,
       {{AE::Joined(), {"WaitPlan(0)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::Marker(Marker(K::kRankFailed, 0, 0, 9)), {"StopRanks(0)"}},
        {AE::Drained(false), {"ReportReaped(0)", "WaitPlan(1)"}},
        {AE::MasterLost("EOF"), {"ExitRanks(4)"}}},
       P::kLeaving,
       4},
      {"the master lost after a final verdict changes nothing",
       0,
       {{AE::Joined(), {"WaitPlan(0)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::Marker(Marker(K::kRankFailed, 0, 0, 9)), {"StopRanks(0)"}},
        {AE::MasterLost("EOF"), kNothing},
        {AE::Drained(false), {"ExitRanks(9)"}}},
       P::kLeaving,
       9},
      {"an aborted plan ends the node with the abort's code",
       0,
       {{AE::Joined(), {"WaitPlan(0)"}},
        {AE::Plan([] {
           JobPlan p;
           p.abort = Marker(K::kJobError, 0, -1, 3);
           return p;
         }()),
         {"ExitRanks(3)"}},
        {AE::SupervisorFinished(3), {"SayBye(3)", "Finish(3)"}}},
       P::kDone,
       3},
      {"the Supervisor gives up on its own (stuck ranks): the others are told",
       0,
       {{AE::Joined(), {"WaitPlan(0)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::SupervisorFinished(5), {"PublishMarker(0)[node_left]", "SayBye(5)", "Finish(5)"}}},
       P::kDone,
       5},
      {"a signal before the job started: bye with 128+S",
       0,
       {{AE::Joined(), {"WaitPlan(0)"}},
        {AE::SupervisorFinished(130), {"SayBye(130)", "Finish(130)"}}},
       P::kDone,
       130},
      {"a node that never joined has nobody to say bye to",
       0,
       {{AE::SupervisorFinished(3), {"Finish(3)"}}},
       P::kDone,
       3},
      {"events of another epoch or phase are ignored",
       1,
       {{AE::Plan(Plan(0)), kNothing},  // not joined yet
        {AE::Joined(), {"WaitPlan(0)"}},
        {AE::Plan(Plan(1)), kNothing},  // not the awaited epoch
        {AE::Plan(Plan(0)), kStart0},
        {AE::Marker(Marker(K::kRankFailed, 3, 0, 1)), kNothing},
        {AE::Drained(true), {"ReportDone(0)"}},
        {AE::Drained(true), kNothing}},
       P::kRunning,
       -1},
  };
  for (const AgentRow& row : rows) {
    SECTION(row.name) {
      AgentConfig config;
      config.node_rank = 1;
      config.max_restarts = row.max_restarts;
      AgentState state;
      int i = 0;
      for (const auto& [event, expected] : row.steps) {
        INFO("step " << i++);
        AgentStep step = Step(state, config, event);
        CHECK(Names(step.actions) == expected);
        state = step.state;
      }
      CHECK(state.phase == row.final_phase);
      CHECK(state.exit_code == row.final_exit_code);
    }
  }
}

TEST_CASE("job policy: the agent marker names its rank, a lost master names node 0",
          "[job_policy]") {
  AgentConfig config;
  config.node_rank = 1;
  config.master_addr = "198.18.0.1";
  AgentState s;
  s = Step(s, config, AE::Joined()).state;
  s = Step(s, config, AE::Plan(Plan(0))).state;
  AgentStep step = Step(s, config, AE::LocalStop(RankFailed(7)));
  REQUIRE(step.actions.size() == 1);
  const StopMarker& m = step.actions[0].marker;
  CHECK(m.kind == K::kRankFailed);
  CHECK(m.node == 1);
  CHECK(m.rank == 2);
  CHECK(m.local_rank == 1);
  CHECK(m.exit_code == 7);
  CHECK(m.restartable);
  LocalStopReport spawn = RankFailed(127);
  spawn.cause = StopCause::kSpawnFailed;
  CHECK_FALSE(Step(s, config, AE::LocalStop(spawn)).actions[0].marker.restartable);

  AgentStep lost = Step(s, config, AE::MasterLost("the connection broke"));
  REQUIRE(lost.state.marker.has_value());
  CHECK(Describe(*lost.state.marker) == "node 0 (198.18.0.1) was lost: the connection broke");
}

// ---------------------------------- coordinator ----------------------------------

namespace {

NodeRegistration Reg(int node, int nproc = 1) {
  NodeRegistration r;
  r.node_rank = node;
  r.nnodes = 3;
  r.nproc = nproc;
  r.max_restarts = 1;
  r.run_id = "none";
  r.host = "h" + std::to_string(node);
  r.addr = "198.18.0." + std::to_string(node + 1);
  return r;
}

using CE = CoordinatorEvent;

struct CoordinatorRow {
  std::string name;
  std::vector<std::pair<CoordinatorEvent, std::vector<std::string>>> steps;
  CoordinatorState::Phase final_phase;
};

std::vector<std::string> Names(const std::vector<CoordinatorAction>& actions) {
  std::vector<std::string> out;
  for (const auto& a : actions) out.push_back(ActionName(a));
  return out;
}

std::vector<std::pair<CoordinatorEvent, std::vector<std::string>>> Gathered() {
  return {{CE::Registered(Reg(0)), kNothing},
          {CE::Registered(Reg(2, 3)), kNothing},
          {CE::Registered(Reg(1, 2)), {"PublishPlan(0)", "WatchEpoch(0)"}}};
}

template <typename T>
std::vector<T> Concat(std::vector<T> a, const std::vector<T>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("job policy: the coordinator's table of event sequences", "[job_policy]") {
  using P = CoordinatorState::Phase;
  const std::vector<std::string> kFinish = {"Finish"};
  const std::vector<CoordinatorRow> rows = {
      {"every node joins, finishes and says bye",
       Concat(Gathered(), {{CE::Done(0, 0), kNothing},
                           {CE::Done(0, 2), kNothing},
                           {CE::Done(0, 1), {"PublishMarker(0)[success]"}},
                           {CE::Marker(Marker(K::kSuccess, 0, -1)), kNothing},
                           {CE::Bye(0, 0), kNothing},
                           {CE::Bye(1, 0), kNothing},
                           {CE::Bye(2, 0), kFinish}}),
       P::kDone},
      {"who is missing is logged while gathering",
       {{CE::Registered(Reg(0)), kNothing},
        {CE::MissingTick(), {"LogMissing[waiting for nodes 1 and 2 to join (1 of 3 present)]"}},
        {CE::Registered(Reg(2)), kNothing},
        {CE::MissingTick(), {"LogMissing[waiting for node 1 to join (2 of 3 present)]"}}},
       P::kGathering},
      {"a restartable failure: the store's key space changes only once every node reaped",
       Concat(Gathered(),
              {{CE::Marker(Marker(K::kRankFailed, 0, 1, 7)), kNothing},
               {CE::Reaped(0, 1), kNothing},
               {CE::Reaped(0, 0), kNothing},
               {CE::MissingTick(),
                {"LogMissing[waiting for node 2 to stop their ranks before restart 1]"}},
               {CE::Reaped(0, 2), {"BeginAttempt(1)", "PublishPlan(1)", "WatchEpoch(1)"}},
               {CE::Marker(Marker(K::kRankFailed, 1, 2, 7)), kNothing},  // budget used up
               {CE::Bye(0, 7), kNothing},
               {CE::Bye(1, 7), kNothing},
               {CE::Bye(2, 7), kFinish}}),
       P::kDone},
      {"a registration that disagrees aborts the job before it starts",
       {{CE::Registered(Reg(0)), kNothing},
        {CE::Registered([] {
           NodeRegistration r = Reg(1);
           r.max_restarts = 4;
           return r;
         }()),
         {"PublishAbort(0)"}},
        {CE::Bye(0, 2), kNothing},
        {CE::Bye(1, 2), kFinish}},
       P::kDone},
      {"an unreadable registration aborts the job too",
       {{CE::BadRegistration(2, "not JSON"), {"PublishAbort(0)"}}, {CE::Bye(2, 2), kFinish}},
       P::kDone},
      {"nodes that never join: the rendezvous deadline aborts the job",
       {{CE::Registered(Reg(0)), kNothing},
        {CE::Registered(Reg(1)), kNothing},
        {CE::RendezvousTimeout(), {"PublishAbort(0)"}},
        {CE::Registered(Reg(2)), kNothing},  // too late
        {CE::Bye(0, 3), kNothing},
        {CE::Bye(1, 3), kFinish}},
       P::kDone},
      {"a node silent while running: the lost marker, then the others' byes",
       Concat(Gathered(),
              {{CE::NodeSilent(2, "no heartbeat for 3.0 s"), {"PublishMarker(0)[node_lost]"}},
               {CE::NodeSilent(2, "no heartbeat for 3.2 s"), kNothing},
               {CE::Marker(Marker(K::kNodeLost, 0, 2)), kNothing},
               {CE::Bye(0, 4), kNothing},
               {CE::Bye(1, 4), kFinish}}),
       P::kDone},
      {"a node lost while the others reap for a restart: the next epoch is aborted",
       Concat(Gathered(), {{CE::Marker(Marker(K::kRankFailed, 0, 0, 7)), kNothing},
                           {CE::Reaped(0, 0), kNothing},
                           {CE::NodeSilent(1, "no heartbeat for 3.0 s"), {"PublishAbort(1)"}},
                           {CE::Reaped(0, 2), kNothing},
                           {CE::Bye(0, 4), kNothing},
                           {CE::Bye(2, 4), kFinish}}),
       P::kDone},
      {"a node already lost when a restartable failure comes: no restart",
       Concat(Gathered(), {{CE::NodeSilent(2, "no heartbeat"), {"PublishMarker(0)[node_lost]"}},
                           {CE::Marker(Marker(K::kRankFailed, 0, 0, 7)), {"PublishAbort(1)"}}}),
       P::kFinishing},
      {"a node that leaves while gathering (signalled) aborts the job",
       {{CE::Registered(Reg(0)), kNothing},
        {CE::Registered(Reg(1)), kNothing},
        {CE::Bye(1, 143), {"PublishAbort(0)"}},
        {CE::Bye(0, 4), kFinish}},
       P::kDone},
      {"a node that says bye early while running is gone",
       Concat(Gathered(), {{CE::Bye(2, 143), {"PublishMarker(0)[node_left]"}}}), P::kRunning},
      {"a node lost while finishing is only logged; silence after bye is not loss",
       Concat(Gathered(),
              {{CE::Marker(Marker(K::kRankFailed, 0, 0, 7)), kNothing},
               {CE::Reaped(0, 0), kNothing},
               {CE::Reaped(0, 1), kNothing},
               {CE::Reaped(0, 2), {"BeginAttempt(1)", "PublishPlan(1)", "WatchEpoch(1)"}},
               {CE::Marker(Marker(K::kRankFailed, 1, 0, 7)), kNothing},
               {CE::Bye(0, 7), kNothing},
               {CE::NodeSilent(0, "x"), kNothing},
               {CE::NodeSilent(1, "no heartbeat for 3.0 s"),
                {"LogLost[node 1 (h1, 198.18.0.2) was lost: no heartbeat for 3.0 s before it "
                 "said bye]"}},
               {CE::Bye(2, 7), kFinish}}),
       P::kDone},
      {"done reports of another epoch or after a marker do not publish success",
       Concat(Gathered(), {{CE::Done(1, 0), kNothing},
                           {CE::Marker(Marker(K::kNodeLeft, 0, 1, 143)), kNothing},
                           {CE::Done(0, 0), kNothing},
                           {CE::Done(0, 1), kNothing},
                           {CE::Done(0, 2), kNothing}}),
       P::kFinishing},
  };
  for (const CoordinatorRow& row : rows) {
    SECTION(row.name) {
      CoordinatorConfig config;
      config.nnodes = 3;
      config.max_restarts = 1;
      config.master = Reg(0);
      config.rdzv_timeout_s = 60;
      CoordinatorState state;
      int i = 0;
      for (const auto& [event, expected] : row.steps) {
        INFO("step " << i++);
        CoordinatorStep step = Step(state, config, event);
        CHECK(Names(step.actions) == expected);
        state = step.state;
      }
      CHECK(state.phase == row.final_phase);
    }
  }
}

TEST_CASE("job policy: the coordinator's plans and aborts carry the details", "[job_policy]") {
  CoordinatorConfig config;
  config.nnodes = 3;
  config.max_restarts = 1;
  config.master = Reg(0);
  config.rdzv_timeout_s = 60;
  CoordinatorState s;
  s = Step(s, config, CE::Registered(Reg(0))).state;
  s = Step(s, config, CE::Registered(Reg(2, 3))).state;
  CoordinatorStep go = Step(s, config, CE::Registered(Reg(1, 2)));
  REQUIRE(go.actions.size() == 2);
  const JobPlan& plan = go.actions[0].plan;
  CHECK(plan.epoch == 0);
  CHECK(plan.world_size == 6);
  REQUIRE(plan.nodes.size() == 3);
  CHECK(plan.nodes[1].rank_offset == 1);
  CHECK(plan.nodes[2].rank_offset == 3);

  CoordinatorState gathering;
  gathering = Step(gathering, config, CE::Registered(Reg(0))).state;
  CoordinatorStep timeout = Step(gathering, config, CE::RendezvousTimeout());
  REQUIRE(timeout.actions.size() == 1);
  REQUIRE(timeout.actions[0].plan.abort.has_value());
  const StopMarker& abort = *timeout.actions[0].plan.abort;
  CHECK(abort.kind == K::kJobError);
  CHECK(abort.exit_code == 3);
  CHECK_THAT(abort.what, Catch::StartsWith("nodes 1 and 2 of 3 did not join within 60 s"));

  CoordinatorStep bad = Step(gathering, config, CE::Registered([] {
                               NodeRegistration r = Reg(2);
                               r.nnodes = 2;
                               return r;
                             }()));
  REQUIRE(bad.actions.size() == 1);
  CHECK(bad.actions[0].plan.abort->exit_code == 2);
  CHECK_THAT(bad.actions[0].plan.abort->what,
             Catch::Contains("expects 2 nodes but node 0 (h0, 198.18.0.1) expects 3"));

  CoordinatorState running = go.state;
  CoordinatorStep silent = Step(running, config, CE::NodeSilent(2, "no heartbeat for 3.1 s"));
  REQUIRE(silent.actions.size() == 1);
  CHECK(Describe(silent.actions[0].marker) ==
        "node 2 (h2, 198.18.0.3) was lost: no heartbeat for 3.1 s");
}

TEST_CASE("job policy: node lists for messages", "[job_policy]") {
  CHECK(JoinNodes({}).empty());
  CHECK(JoinNodes({3}) == "3");
  CHECK(JoinNodes({1, 2}) == "1 and 2");
  CHECK(JoinNodes({1, 2, 5}) == "1, 2 and 5");
}

}  // namespace gculaunch::job
