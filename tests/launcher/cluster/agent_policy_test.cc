#include "launcher/cluster/agent_policy.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/launcher/cluster/policy_fixture.h"

namespace gculaunch::job {
namespace {

JobPlan Plan(int epoch) {
  std::vector<NodeRegistration> regs(2);
  regs[0].node_rank = 0;
  regs[0].nproc = 1;
  regs[1].node_rank = 1;
  regs[1].nproc = 2;
  return MakePlanForTest(regs, epoch, 0);
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

// The actions that do something; the log lines have their own table (Logs).
std::vector<std::string> Names(const std::vector<AgentAction>& actions) {
  std::vector<std::string> out;
  for (const auto& a : actions) {
    if (a.kind != AgentAction::Kind::kLog) out.push_back(ActionName(a));
  }
  return out;
}

std::vector<std::string> Logs(const std::vector<AgentAction>& actions) {
  std::vector<std::string> out;
  for (const auto& a : actions) {
    if (a.kind == AgentAction::Kind::kLog) out.push_back(ActionName(a));
  }
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
        {AE::Marker(MarkerForTest(K::kSuccess, 0, -1)), {"ExitRanks(0)"}},
        {AE::SupervisorFinished(0), {"SayBye(0)", "Finish(0)"}}},
       P::kDone,
       0},
      {"a local failure is published, the job restarts, then succeeds",
       1,
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::LocalStop(RankFailed(7)), {"PublishMarker(0)[rank_failed]"}},
        {AE::Marker(MarkerForTest(K::kRankFailed, 0, 1, 7)), kNothing},  // already stopping
        {AE::Drained(false), {"ReportReaped(0)", "WaitPlan(1)"}},
        {AE::Plan(Plan(1)), kStart1},
        {AE::Drained(true), {"ReportDone(1)"}},
        {AE::Marker(MarkerForTest(K::kSuccess, 1, -1)), {"ExitRanks(0)"}},
        {AE::SupervisorFinished(0), {"SayBye(0)", "Finish(0)"}}},
       P::kDone,
       0},
      {"another node's failure without restarts: stop, then that rank's code",
       0,
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::Marker(MarkerForTest(K::kRankFailed, 0, 0, 7)), {"StopRanks(0)"}},
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
        {AE::Marker(MarkerForTest(K::kRankFailed, 0, 1, 3)), {"ReportReaped(0)", "WaitPlan(1)"}}},
       P::kWaitingPlan,
       -1},
      {"the restart budget is job-wide: a failure in epoch 1 ends a 1-restart job",
       1,
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::Marker(MarkerForTest(K::kRankFailed, 0, 0, 5)), {"StopRanks(0)"}},
        {AE::Drained(false), {"ReportReaped(0)", "WaitPlan(1)"}},
        {AE::Plan(Plan(1)), kStart1},
        {AE::Marker(MarkerForTest(K::kRankFailed, 1, 0, 6)), {"StopRanks(1)"}},
        {AE::Drained(false), {"ExitRanks(6)"}}},
       P::kLeaving,
       6},
      {"a teardown signal: the node publishes that it leaves and keeps 128+S",
       1,
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::LocalStop(Signalled(15)), {"PublishMarker(0)[node_left]"}},
        {AE::Marker(MarkerForTest(K::kNodeLeft, 0, 1, 143)), kNothing},
        {AE::SupervisorFinished(143), {"SayBye(143)", "Finish(143)"}}},
       P::kDone,
       143},
      {"a signalled node leaves even when another node's restartable failure won",
       1,
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::LocalStop(Signalled(2)), {"PublishMarker(0)[node_left]"}},
        {AE::Marker(MarkerForTest(K::kRankFailed, 0, 0, 1)), kNothing},
        {AE::Drained(false), {"ExitRanks(130)"}}},
       P::kLeaving,
       130},
      {"another node lost without restarts: stop, exit 4",
       0,
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::Marker(MarkerForTest(K::kNodeLost, 0, 2)), {"StopRanks(0)"}},
        {AE::Drained(false), {"ExitRanks(4)"}}},
       P::kLeaving,
       4},
      {"the master lost while the ranks run, no restart left: stop, exit 4",
       0,
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::Node0Lost("EOF"), {"StopRanks(0)"}},
        {AE::Drained(false), {"ExitRanks(4)"}},
        {AE::Node0Lost("again"), kNothing}},
       P::kLeaving,
       4},
      {"the master lost while waiting for the next epoch: join again, reporting epoch 0",
       1,
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::Marker(MarkerForTest(K::kRankFailed, 0, 0, 9)), {"StopRanks(0)"}},
        {AE::Drained(false), {"ReportReaped(0)", "WaitPlan(1)"}},
        {AE::Node0Lost("EOF"), {"Join(0)"}},
        {AE::Node0Lost("refused"), {"Join(0)"}},  // still away: try again
        {AE::Plan(Plan(1)), kStart1}},
       P::kRunning,
       -1},
      {"another node lost with a restart left: stop, reap, wait for the next epoch",
       1,
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::Marker(MarkerForTest(K::kNodeLost, 0, 2)), {"StopRanks(0)"}},
        {AE::Drained(false), {"ReportReaped(0)", "WaitPlan(1)"}},
        {AE::Plan(Plan(1)), kStart1}},
       P::kRunning,
       -1},
      {"the master lost while the ranks run: stop, then join again once they are gone",
       2,
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::Node0Lost("EOF"), {"StopRanks(0)"}},
        {AE::LocalStop(RankFailed(1)), kNothing},  // its ranks lost their peers: no marker
        {AE::Node0Lost("again"), kNothing},
        {AE::Drained(false), {"Join(0)"}},
        {AE::Plan(Plan(1)), kStart1}},  // the new node 0 admits it at epoch 0 + 1
       P::kRunning,
       -1},
      {"a marker that names this node lost (it was cut off): it joins again",
       1,
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::Marker(MarkerForTest(K::kNodeLost, 0, 1)), {"StopRanks(0)"}},
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
        {AE::Marker(MarkerForTest(K::kRankFailed, 0, 0, 9)), {"StopRanks(0)"}},
        {AE::Node0Lost("EOF"), kNothing},
        {AE::Drained(false), {"ExitRanks(9)"}}},
       P::kLeaving,
       9},
      {"an aborted plan ends the node with the abort's code",
       0,
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan([] {
           JobPlan p;
           p.abort = MarkerForTest(K::kJobError, 0, -1, 3);
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
      {"node 0 did not come back within --rdzv-timeout: exit 4, and no bye (no member)",
       1,
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::Node0Lost("EOF"), {"StopRanks(0)"}},
        {AE::Drained(false), {"Join(0)"}},
        {AE::Node0Lost("refused"), {"Join(0)"}},
        {AE::RejoinDeadline("could not reach 198.18.0.1:29400"), {"ExitRanks(4)"}},
        {AE::Node0Lost("late"), kNothing},
        {AE::SupervisorFinished(4), {"Finish(4)"}}},
       P::kDone,
       4},
      {"a deadline after the admission changes nothing",
       1,
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::RejoinDeadline("late"), kNothing}},
       P::kRunning,
       -1},
      {"events of another epoch or phase are ignored",
       1,
       {{AE::Start(), {"Join(-1)"}},
        {AE::Plan(Plan(0)), kStart0},
        {AE::Plan(Plan(1)), kNothing},  // not waiting for a plan
        {AE::Start(), kNothing},
        {AE::Marker(MarkerForTest(K::kRankFailed, 3, 0, 1)), kNothing},
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
  config.node0_name = "198.18.0.1";
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

  AgentStep lost = Step(s, config, AE::Node0Lost("the connection broke"));
  REQUIRE(lost.state.marker.has_value());
  CHECK(Describe(*lost.state.marker) == "node 0 (198.18.0.1) was lost: the connection broke");
}

TEST_CASE("agent policy: an unhealthy node leaves with a restartable marker naming the checks",
          "[agent_policy]") {
  AgentConfig config;
  config.node_rank = 2;
  AgentState s;
  s = Step(s, config, AE::Start()).state;
  s = Step(s, config, AE::Plan(Plan(1))).state;
  const AgentStep stuck = Step(s, config, AE::SupervisorFinished(5));
  REQUIRE(stuck.actions.size() >= 1);
  CHECK_FALSE(stuck.actions[0].marker.restartable);  // stuck ranks: no return
  const AgentStep step =
      Step(s, config, AE::SupervisorFinished(5, "nvidia-smi: card 3: uncorrectable ECC errors"));
  REQUIRE(Names(step.actions) ==
          std::vector<std::string>{"PublishMarker(1)[node_left]", "SayBye(5)", "Finish(5)"});
  const StopMarker& m = step.actions[0].marker;
  CHECK(m.restartable);
  CHECK(m.node == 2);
  CHECK(m.exit_code == 5);
  CHECK(m.what ==
        "its cards are unhealthy (nvidia-smi: card 3: uncorrectable ECC errors); it left the job");
  CHECK(step.state.exit_code == 5);
}

namespace {

JobPlan Aborted(StopMarker abort) {
  JobPlan p;
  p.abort = std::move(abort);
  return p;
}

StopMarker Refusal() {
  StopMarker m = MarkerForTest(K::kJobError, 0, -1, 2);
  m.what = "refused: node 1 belongs to job a, not b (fix: use the same --rdzv-id)";
  return m;
}

struct LogRow {
  std::string name;
  int max_restarts;
  int min_nodes;  ///< of --nnodes MIN:3; 0: a fixed size
  bool elected_leader;
  std::vector<AgentEvent> events;
  std::vector<std::string> logs;  ///< every line the events told, in order
};

}  // namespace

TEST_CASE("agent policy: the table of log lines, worded where the outcome is decided",
          "[agent_policy]") {
  const std::string kRestart = " (restart 1 of 1)";
  const std::vector<AgentEvent> kRunning = {AE::Start(), AE::Plan(Plan(0))};
  const auto then = [&](std::vector<AgentEvent> more) {
    std::vector<AgentEvent> all = kRunning;
    all.insert(all.end(), more.begin(), more.end());
    return all;
  };
  const std::vector<LogRow> rows = {
      {"success",
       0,
       0,
       false,
       then({AE::Drained(true), AE::Marker(MarkerForTest(K::kSuccess, 0, -1))}),
       {"Log[info: every node's ranks finished successfully]"}},
      {"a rank failed, a restart left: which restart",
       1,
       0,
       false,
       then({AE::Marker(MarkerForTest(K::kRankFailed, 0, 0, 7))}),
       {"Log[warn: rank 2 (local rank 0) on node 0 failed with exit code 7; every node restarts "
        "its ranks" +
        kRestart + "]"}},
      {"a rank failed, no restart left: the code and why",
       1,
       0,
       false,
       then({AE::Marker([] {
         StopMarker m = MarkerForTest(K::kRankFailed, 0, 0, 7);
         m.restarts = 1;
         return m;
       }())}),
       {"Log[error: rank 2 (local rank 0) on node 0 failed with exit code 7; every node stops "
        "(exit code 7, no restart left (--max-restarts 1))]"}},
      {"a rank failed without restarts",
       0,
       0,
       false,
       then({AE::Marker(MarkerForTest(K::kRankFailed, 0, 0, 7))}),
       {"Log[error: rank 2 (local rank 0) on node 0 failed with exit code 7; every node stops "
        "(exit code 7)]"}},
      {"another node lost, fixed size: the job waits for it",
       1,
       0,
       false,
       then({AE::Marker(MarkerForTest(K::kNodeLost, 0, 2))}),
       {"Log[warn: node 2 was lost: ; every node stops its ranks and waits up to 60 s for it to "
        "come back" +
        kRestart + "]"}},
      {"another node lost on etcd (MIN = MAX): or a replacement",
       1,
       3,
       true,
       then({AE::Marker(MarkerForTest(K::kNodeLost, 0, 2))}),
       {"Log[warn: node 2 was lost: ; every node stops its ranks and waits up to 60 s for it or "
        "a replacement to join" +
        kRestart + "]"}},
      {"another node lost, elastic 2:3: the job re-forms without it",
       1,
       2,
       false,
       then({AE::Marker(MarkerForTest(K::kNodeLost, 0, 2))}),
       {"Log[warn: node 2 was lost: ; the job re-forms without it if 2 node(s) remain" + kRestart +
        "]"}},
      {"a node joined: the job re-forms",
       1,
       2,
       false,
       then({AE::Marker(MarkerForTest(K::kNodeJoined, 0, 2))}),
       {"Log[warn: node 2 joined the job: ; every node stops its ranks and the job re-forms]"}},
      {"node 0 lost while the ranks run, then gone past the deadline: exit 4 naming node 0",
       1,
       0,
       false,
       then({AE::Node0Lost("EOF"), AE::Drained(false), AE::Node0Lost("refused"),
             AE::RejoinDeadline("could not reach 198.18.0.1:29400")}),
       {"Log[warn: node 0 (198.18.0.1) was lost: EOF; every node stops its ranks and waits up to "
        "60 s for it to come back" +
            kRestart + "]",
        "Log[error: node 0 (198.18.0.1) was lost: it did not come back within 60 s "
        "(--rdzv-timeout); could not reach 198.18.0.1:29400; this node stops (exit code 4)]"}},
      {"the leader lost on etcd: joins again under the next leader",
       1,
       3,
       true,
       then({AE::Node0Lost("the leader's lease expired")}),
       {"Log[warn: node 0 (198.18.0.1) was lost: the leader's lease expired; this node stops "
        "its ranks and joins the job again under the next leader (at most 60 s, --rdzv-timeout; "
        "restart 1 of 1)]"}},
      {"node 0 lost without restarts: the end",
       0,
       0,
       false,
       then({AE::Node0Lost("EOF")}),
       {"Log[error: node 0 (198.18.0.1) was lost: EOF; every node stops (exit code 4)]"}},
      {"node 0's store gone while waiting for a plan: told once per return",
       1,
       0,
       false,
       then({AE::Marker(MarkerForTest(K::kRankFailed, 0, 0, 9)), AE::Drained(false),
             AE::Node0Lost("EOF"), AE::Node0Lost("refused")}),
       {"Log[warn: rank 2 (local rank 0) on node 0 failed with exit code 9; every node restarts "
        "its ranks" +
            kRestart + "]",
        "Log[warn: node 0's store went away (EOF); this node joins again when it is back (at "
        "most 60 s, --rdzv-timeout)]"}},
      {"the same on etcd: under the next leader",
       1,
       3,
       true,
       then({AE::Marker(MarkerForTest(K::kRankFailed, 0, 0, 9)), AE::Drained(false),
             AE::Node0Lost("the leader's lease expired"), AE::Node0Lost("refused")}),
       {"Log[warn: rank 2 (local rank 0) on node 0 failed with exit code 9; every node restarts "
        "its ranks" +
            kRestart + "]",
        "Log[warn: the leader's lease expired; this node joins the job again under the next "
        "leader (at most 60 s, --rdzv-timeout)]"}},
      {"node 0 gone during the first join: told once; again after the admission",
       1,
       0,
       false,
       {AE::Start(), AE::Node0Lost("EOF"), AE::Node0Lost("refused"), AE::Plan(Plan(0)),
        AE::Marker(MarkerForTest(K::kRankFailed, 0, 0, 9)), AE::Drained(false),
        AE::Node0Lost("EOF")},
       {"Log[warn: node 0's store went away (EOF); this node joins again when it is back (at "
        "most 60 s, --rdzv-timeout)]",
        "Log[warn: rank 2 (local rank 0) on node 0 failed with exit code 9; every node restarts "
        "its ranks" +
            kRestart + "]",
        "Log[warn: node 0's store went away (EOF); this node joins again when it is back (at "
        "most 60 s, --rdzv-timeout)]"}},
      {"a refused join: the refusal and its code",
       1,
       0,
       false,
       {AE::Start(), AE::Plan(Aborted(Refusal()))},
       {"Log[error: refused: node 1 belongs to job a, not b (fix: use the same --rdzv-id); this "
        "node stops (exit code 2)]"}},
      {"a marker read after the bye is still told",
       0,
       0,
       false,
       then({AE::SupervisorFinished(5), AE::Marker(MarkerForTest(K::kNodeLeft, 0, 1, 5))}),
       {"Log[error: node 1 left the job: ; every node stops (exit code 5)]"}},
  };
  for (const LogRow& row : rows) {
    SECTION(row.name) {
      AgentConfig config;
      config.node_rank = 1;
      config.max_restarts = row.max_restarts;
      config.node0_name = "198.18.0.1";
      config.rdzv_timeout_s = 60;
      config.nnodes = 3;
      config.min_nodes = row.min_nodes;
      config.elected_leader = row.elected_leader;
      AgentState state;
      std::vector<std::string> logs;
      for (const AgentEvent& event : row.events) {
        AgentStep step = Step(state, config, event);
        for (std::string& line : Logs(step.actions)) logs.push_back(std::move(line));
        state = step.state;
      }
      CHECK(logs == row.logs);
    }
  }
}

TEST_CASE("agent policy: a refusal found before joining is worded like the coordinator's",
          "[agent_policy]") {
  AgentConfig config;
  const AgentAction line = MarkerLog(Refusal(), config);
  CHECK(line.kind == AgentAction::Kind::kLog);
  CHECK(line.level == AgentAction::Level::kError);
  CHECK(line.text ==
        "refused: node 1 belongs to job a, not b (fix: use the same --rdzv-id); this node stops "
        "(exit code 2)");
}

}  // namespace gculaunch::job
