#include "launcher/cluster/agent_policy.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace gculaunch::job {
namespace {

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
  m.restartable = kind == StopMarker::Kind::kRankFailed || kind == StopMarker::Kind::kNodeLost ||
                  kind == StopMarker::Kind::kNodeLeft;
  if (kind == StopMarker::Kind::kRankFailed) {
    m.rank = 2;
    m.local_rank = 0;
    m.what = "exit code " + std::to_string(code);
  }
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

TEST_CASE("agent policy: the table of event sequences", "[agent_policy]") {
  using P = AgentState::Phase;
  const std::vector<std::string> kStart0 = {"StartRanks(0)", "WatchMarker(0)"};
  const std::vector<std::string> kStart1 = {"StartRanks(1)", "WatchMarker(1)"};
  const std::vector<AgentRow> rows = {
      {"every node succeeds: done reported, exit 0 on the success marker",
       0,
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::Drained(true), {"ReportDone(0)"}},
        {AE::Marker(Marker(K::kSuccess, 0, -1)), {"ExitRanks(0)"}},
        {AE::SupervisorFinished(0), {"SayBye(0)", "Finish(0)"}}},
       P::kDone,
       0},
      {"a local failure is published, the job restarts, then succeeds",
       1,
       {{AE::Start(), {"Join(-1)"}},
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
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::Marker(Marker(K::kRankFailed, 0, 0, 7)), {"StopRanks(0)"}},
        {AE::LocalStop(RankFailed(1)), kNothing},  // a consequence: never published
        {AE::Drained(false), {"ExitRanks(7)"}},
        {AE::SupervisorFinished(7), {"SayBye(7)", "Finish(7)"}}},
       P::kDone,
       7},
      {"the marker may arrive after the drain",
       1,
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::LocalStop(RankFailed(3)), {"PublishMarker(0)[rank_failed]"}},
        {AE::Drained(false), kNothing},
        {AE::Marker(Marker(K::kRankFailed, 0, 1, 3)), {"ReportReaped(0)", "WaitPlan(1)"}}},
       P::kWaitingPlan,
       -1},
      {"the restart budget is job-wide: a failure in epoch 1 ends a 1-restart job",
       1,
       {{AE::Start(), {"Join(-1)"}},
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
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::LocalStop(Signalled(15)), {"PublishMarker(0)[node_left]"}},
        {AE::Marker(Marker(K::kNodeLeft, 0, 1, 143)), kNothing},
        {AE::SupervisorFinished(143), {"SayBye(143)", "Finish(143)"}}},
       P::kDone,
       143},
      {"a signalled node leaves even when another node's restartable failure won",
       1,
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::LocalStop(Signalled(2)), {"PublishMarker(0)[node_left]"}},
        {AE::Marker(Marker(K::kRankFailed, 0, 0, 1)), kNothing},
        {AE::Drained(false), {"ExitRanks(130)"}}},
       P::kLeaving,
       130},
      {"another node lost without restarts: stop, exit 4",
       0,
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::Marker(Marker(K::kNodeLost, 0, 2)), {"StopRanks(0)"}},
        {AE::Drained(false), {"ExitRanks(4)"}}},
       P::kLeaving,
       4},
      {"the master lost while the ranks run, no restart left: stop, exit 4",
       0,
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::MasterLost("EOF"), {"StopRanks(0)"}},
        {AE::Drained(false), {"ExitRanks(4)"}},
        {AE::MasterLost("again"), kNothing}},
       P::kLeaving,
       4},
      {"the master lost while waiting for the next epoch: join again, reporting epoch 0",
       1,
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::Marker(Marker(K::kRankFailed, 0, 0, 9)), {"StopRanks(0)"}},
        {AE::Drained(false), {"ReportReaped(0)", "WaitPlan(1)"}},
        {AE::MasterLost("EOF"), {"Join(0)"}},
        {AE::MasterLost("refused"), {"Join(0)"}},  // still away: try again
        {AE::Plan(Plan(1)), kStart1}},
       P::kRunning,
       -1},
      {"another node lost with a restart left: stop, reap, wait for the next epoch",
       1,
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::Marker(Marker(K::kNodeLost, 0, 2)), {"StopRanks(0)"}},
        {AE::Drained(false), {"ReportReaped(0)", "WaitPlan(1)"}},
        {AE::Plan(Plan(1)), kStart1}},
       P::kRunning,
       -1},
      {"the master lost while the ranks run: stop, then join again once they are gone",
       2,
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::MasterLost("EOF"), {"StopRanks(0)"}},
        {AE::LocalStop(RankFailed(1)), kNothing},  // its ranks lost their peers: no marker
        {AE::MasterLost("again"), kNothing},
        {AE::Drained(false), {"Join(0)"}},
        {AE::Plan(Plan(1)), kStart1}},  // the new node 0 admits it at epoch 0 + 1
       P::kRunning,
       -1},
      {"a marker that names this node lost (it was cut off): it joins again",
       1,
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::Marker(Marker(K::kNodeLost, 0, 1)), {"StopRanks(0)"}},
        {AE::Drained(false), {"Join(0)"}}},
       P::kJoining,
       -1},
      {"a node admitted into a running job starts at the job's epoch",
       3,
       {{AE::Start(), {"Join(-1)"}}, {AE::Plan(Plan(2)), {"StartRanks(2)", "WatchMarker(2)"}}},
       P::kRunning,
       -1},
      {"the master lost after a final verdict changes nothing",
       0,
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::Marker(Marker(K::kRankFailed, 0, 0, 9)), {"StopRanks(0)"}},
        {AE::MasterLost("EOF"), kNothing},
        {AE::Drained(false), {"ExitRanks(9)"}}},
       P::kLeaving,
       9},
      {"an aborted plan ends the node with the abort's code",
       0,
       {{AE::Start(), {"Join(-1)"}},
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
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::SupervisorFinished(5), {"PublishMarker(0)[node_left]", "SayBye(5)", "Finish(5)"}}},
       P::kDone,
       5},
      {"a signal before the job started: no member yet, no bye",
       0,
       {{AE::Start(), {"Join(-1)"}}, {AE::SupervisorFinished(130), {"Finish(130)"}}},
       P::kDone,
       130},
      {"a node that never joined has nobody to say bye to",
       0,
       {{AE::SupervisorFinished(3), {"Finish(3)"}}},
       P::kDone,
       3},
      {"events of another epoch or phase are ignored",
       1,
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::Plan(Plan(1)), kNothing},  // not waiting for a plan
        {AE::Start(), kNothing},
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

TEST_CASE("agent policy: the marker names its rank, a lost master names node 0", "[agent_policy]") {
  AgentConfig config;
  config.node_rank = 1;
  config.master_addr = "198.18.0.1";
  AgentState s;
  s = Step(s, config, AE::Start()).state;
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

}  // namespace gculaunch::job
