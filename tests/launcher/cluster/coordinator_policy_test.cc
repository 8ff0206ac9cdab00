#include "launcher/cluster/coordinator_policy.h"

#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <vector>

#include "tests/launcher/cluster/policy_fixture.h"

namespace gculaunch::job {
namespace {

using K = StopMarker::Kind;

const std::vector<std::string> kNothing;

NodeRegistration Reg(int node, int nproc = 1, int last_epoch = -1, std::string inc = "") {
  NodeRegistration r;
  r.node_rank = node;
  r.nnodes = 3;
  r.nproc = nproc;
  r.max_restarts = 1;
  r.run_id = "none";
  r.host = "h" + std::to_string(node);
  r.addr = "198.18.0." + std::to_string(node + 1);
  r.incarnation = inc.empty() ? "i" + std::to_string(node) : inc;
  r.last_epoch = last_epoch;
  return r;
}

using CE = CoordinatorEvent;

// The members a step added, removed, replaced or lost that it did not name in
// CoordinatorState::roster (the executor re-reads only the named ones): must be none.
std::vector<int> UnnamedChanges(const CoordinatorState& before, const CoordinatorState& after) {
  std::set<int> named(after.roster.begin() + static_cast<std::ptrdiff_t>(before.roster.size()),
                      after.roster.end());
  std::set<int> nodes;
  for (const auto& [node, m] : before.members) nodes.insert(node);
  for (const auto& [node, m] : after.members) nodes.insert(node);
  std::vector<int> unnamed;
  for (const int node : nodes) {
    auto was = before.members.find(node);
    auto now = after.members.find(node);
    const bool changed =
        (was == before.members.end()) != (now == after.members.end()) ||
        (was != before.members.end() &&
         (was->second.away != now->second.away || was->second.seq != now->second.seq ||
          was->second.reg.incarnation != now->second.reg.incarnation));
    if (changed && named.count(node) == 0) unnamed.push_back(node);
  }
  return unnamed;
}

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

const std::vector<std::string> kGo0 = {"PublishPlan(0)", "Admit(0/1)(0)", "Admit(1/1)(0)",
                                       "Admit(2/1)(0)", "WatchEpoch(0)"};

std::vector<std::pair<CoordinatorEvent, std::vector<std::string>>> Gathered() {
  return {{CE::Join(1, Reg(0)), kNothing},
          {CE::Join(1, Reg(2, 3)), kNothing},
          {CE::Join(1, Reg(1, 2)), kGo0}};
}

template <typename T>
std::vector<T> Concat(std::vector<T> a, const std::vector<T>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("coordinator policy: the table of event sequences", "[coordinator_policy]") {
  using P = CoordinatorState::Phase;
  const std::vector<std::string> kFinish = {"Finish"};
  const std::string kNode2Lost = "node 2 (h2, 198.18.0.3) was lost: no heartbeat for 3.0 s";
  const std::vector<CoordinatorRow> rows = {
      {"every node joins, finishes and says bye",
       Concat(Gathered(), {{CE::Done(0, 0), kNothing},
                           {CE::Done(0, 2), kNothing},
                           {CE::Done(0, 1), {"PublishMarker(0)[success]"}},
                           {CE::Marker(MarkerForTest(K::kSuccess, 0, -1)), kNothing},
                           {CE::Bye(0, 1, 0), kNothing},
                           {CE::Bye(1, 1, 0), kNothing},
                           {CE::Bye(2, 1, 0), kFinish}}),
       P::kDone},
      {"who is missing is logged while gathering",
       {{CE::Join(1, Reg(0)), kNothing},
        {CE::MissingTick(), {"LogMissing[waiting for nodes 1 and 2 to join (1 of 3 present)]"}},
        {CE::Join(1, Reg(2)), kNothing},
        {CE::MissingTick(), {"LogMissing[waiting for node 1 to join (2 of 3 present)]"}}},
       P::kGathering},
      {"a restartable failure: the store's key space changes only once every node reaped",
       Concat(Gathered(),
              {{CE::Marker(MarkerForTest(K::kRankFailed, 0, 1, 7)), kNothing},
               {CE::Reaped(0, 1), kNothing},
               {CE::Reaped(0, 0), kNothing},
               {CE::MissingTick(),
                {"LogMissing[waiting for node 2 to stop their ranks before restart 1]"}},
               {CE::Reaped(0, 2), {"BeginAttempt(1)", "PublishPlan(1)", "WatchEpoch(1)"}},
               {CE::Marker(MarkerForTest(K::kRankFailed, 1, 2, 7)), kNothing},  // budget used up
               {CE::Bye(0, 1, 7), kNothing},
               {CE::Bye(1, 1, 7), kNothing},
               {CE::Bye(2, 1, 7), kFinish}}),
       P::kDone},
      {"a member that disagrees ends the job before it starts",
       {{CE::Join(1, Reg(0)), kNothing},
        {CE::Join(1,
                  [] {
                    NodeRegistration r = Reg(1);
                    r.max_restarts = 4;
                    return r;
                  }()),
         {"PublishAbort(0)", "Refuse(0/1)(0)", "Refuse(1/1)(0)"}},
        {CE::Bye(0, 1, 2), kNothing},
        {CE::Bye(1, 1, 2), kFinish}},
       P::kDone},
      {"an unreadable join request is refused; the job goes on",
       {{CE::BadJoin(2, 1, "not JSON"),
         {"Refuse(2/1)(0)",
          "Log[refused a join request for node 2: node 2 sent an unreadable not JSON]"}},
        {CE::Join(2, Reg(2)), kNothing}},
       P::kGathering},
      {"a stranger (another run id) is refused; the job goes on",
       {{CE::Join(1, Reg(0)), kNothing},
        {CE::Join(1,
                  [] {
                    NodeRegistration r = Reg(1);
                    r.run_id = "other";
                    r.max_restarts = 5;  // a stranger's settings end nothing
                    return r;
                  }()),
         {"Refuse(1/1)(0)",
          "Log[refused a join request for node 1: node 1 (h1, 198.18.0.2) belongs to job "
          "'other' but the job at this MASTER_ADDR:MASTER_PORT is 'none']"}},
        {CE::Join(2, Reg(1, 2)), kNothing},
        {CE::Join(1, Reg(2, 3)),
         {"PublishPlan(0)", "Admit(0/1)(0)", "Admit(1/2)(0)", "Admit(2/1)(0)", "WatchEpoch(0)"}}},
       P::kRunning},
      {"nodes that never join: the rendezvous deadline aborts the job",
       {{CE::Join(1, Reg(0)), kNothing},
        {CE::Join(1, Reg(1)), kNothing},
        {CE::RendezvousTimeout(), {"PublishAbort(0)", "Refuse(0/1)(0)", "Refuse(1/1)(0)"}},
        {CE::Join(1, Reg(2)), {"Refuse(2/1)(0)"}},  // too late: told the job is over
        {CE::Bye(0, 1, 3), kNothing},
        {CE::Bye(1, 1, 3), kFinish}},
       P::kDone},
      {"a node lost while running: the job waits for it, a new gculaunch rejoins, restart 1",
       Concat(Gathered(),
              {{CE::NodeSilent(2, 1, "no heartbeat for 3.0 s"), {"PublishMarker(0)[node_lost]"}},
               {CE::NodeSilent(2, 1, "no heartbeat for 3.2 s"), kNothing},
               {CE::Marker(MarkerForTest(K::kNodeLost, 0, 2)), kNothing},
               {CE::Reaped(0, 0), kNothing},
               {CE::Reaped(0, 1), kNothing},
               {CE::MissingTick(),
                {"LogMissing[waiting for node 2 (h2, 198.18.0.3) to come back (" + kNode2Lost +
                 "), at most 60 s after the loss (--rdzv-timeout)]"}},
               {CE::Join(2, Reg(2, 3, -1, "new")),
                {"Log[node 2 (h2, 198.18.0.3) is back (a new gculaunch, pid 0, 198.18.0.3)]",
                 "BeginAttempt(1)", "PublishPlan(1)", "Admit(2/2)(1)", "WatchEpoch(1)"}},
               {CE::Join(3, Reg(2, 3, 0)),  // the old one, back after its replacement
                {"Refuse(2/3)(1)",
                 "Log[refused a join request for node 2: node rank 2 is already taken by node 2 "
                 "(h2, 198.18.0.3) (pid 0): this gculaunch was replaced while it was away]"}}}),
       P::kRunning},
      {"a node that lost node 0 first joins again as itself: counted lost, then back",
       Concat(Gathered(),
              {{CE::Join(2, Reg(2, 3, 0)),
                {"PublishMarker(0)[node_lost]",
                 "Log[node 2 (h2, 198.18.0.3) is back (the same gculaunch)]"}},
               {CE::Marker(MarkerForTest(K::kNodeLost, 0, 2)), kNothing},
               {CE::Reaped(0, 0), kNothing},
               {CE::Reaped(0, 1),
                {"BeginAttempt(1)", "PublishPlan(1)", "Admit(2/2)(1)", "WatchEpoch(1)"}}}),
       P::kRunning},
      {"a node lost after the restart counted it as reaped: the restart waits for it",
       // Reaps in node order: the restart looks at each node once (restart_ready), and a node
       // it already counted that then goes away is looked at again.
       Concat(Gathered(),
              {{CE::Marker(MarkerForTest(K::kRankFailed, 0, 2, 7)), kNothing},
               {CE::Reaped(0, 0), kNothing},
               {CE::Reaped(0, 1), kNothing},
               {CE::NodeSilent(1, 1, "no heartbeat for 3.0 s"),
                {"Log[node 1 (h1, 198.18.0.2) was lost: no heartbeat for 3.0 s "
                 "while the job re-forms; it waits for it to come back (rank 2 "
                 "(local rank 0) on node 2 failed with exit code 7 first: taken as "
                 "a consequence, one restart for both)]"}},
               {CE::Reaped(0, 2), kNothing},
               {CE::Join(2, Reg(1, 2, 0, "new")),
                {"Log[node 1 (h1, 198.18.0.2) is back (a new gculaunch, pid 0, "
                 "198.18.0.2)]",
                 "BeginAttempt(1)", "PublishPlan(1)", "Admit(1/2)(1)", "WatchEpoch(1)"}}}),
       P::kRunning},
      {"a node away past the deadline ends the job; its old join's bye changes nothing",
       Concat(Gathered(), {{CE::Marker(MarkerForTest(K::kRankFailed, 0, 0, 7)), kNothing},
                           {CE::Reaped(0, 0), kNothing},
                           {CE::NodeSilent(1, 1, "no heartbeat for 3.0 s"),
                            {"Log[node 1 (h1, 198.18.0.2) was lost: no heartbeat for 3.0 s "
                             "while the job re-forms; it waits for it to come back (rank 2 "
                             "(local rank 0) on node 0 failed with exit code 7 first: taken as "
                             "a consequence, one restart for both)]"}},
                           {CE::Reaped(0, 2), kNothing},
                           {CE::RejoinTimeout(1), {"PublishAbort(1)"}},
                           {CE::Bye(0, 1, 4), kNothing},
                           {CE::Bye(2, 1, 4), kFinish}}),
       P::kDone},
      {"a consequence failure first, then the node loss: one re-form for both",
       Concat(Gathered(),
              {{CE::NodeSilent(2, 1, "no heartbeat"), {"PublishMarker(0)[node_lost]"}},
               {CE::Marker(MarkerForTest(K::kRankFailed, 0, 0, 7)),
                {"Log[rank 2 (local rank 0) on node 0 failed with exit code 7 before node 2 (h2, "
                 "198.18.0.3) was known lost: taken as a consequence, one restart for both]"}}}),
       P::kRestarting},
      {"restarts used up: a loss ends the job",
       Concat(Gathered(),
              {{CE::Marker(MarkerForTest(K::kRankFailed, 0, 0, 7)), kNothing},
               {CE::Reaped(0, 0), kNothing},
               {CE::Reaped(0, 1), kNothing},
               {CE::Reaped(0, 2), {"BeginAttempt(1)", "PublishPlan(1)", "WatchEpoch(1)"}},
               {CE::NodeSilent(2, 1, "no heartbeat"), {"PublishMarker(1)[node_lost]"}},
               {CE::Marker(MarkerForTest(K::kNodeLost, 1, 2)), kNothing},
               {CE::Bye(0, 1, 4), kNothing},
               {CE::Bye(1, 1, 4), kFinish}}),
       P::kDone},
      {"a node that leaves while gathering may join again",
       {{CE::Join(1, Reg(0)), kNothing},
        {CE::Join(1, Reg(1)), kNothing},
        {CE::Bye(1, 1, 143),
         {"Log[node 1 (h1, 198.18.0.2) left the job: its gculaunch exited with code 143 before "
          "the job started; waiting for it to join again]"}},
        {CE::Join(2, Reg(2)), kNothing},
        {CE::Join(2, Reg(1, 1, -1, "again")),
         {"PublishPlan(0)", "Admit(0/1)(0)", "Admit(1/2)(0)", "Admit(2/2)(0)", "WatchEpoch(0)"}}},
       P::kRunning},
      {"a node that says bye early while running is gone",
       Concat(Gathered(), {{CE::Bye(2, 1, 143), {"PublishMarker(0)[node_left]"}}}), P::kRunning},
      {"node 0 itself leaving while the job goes on stops the store",
       Concat(Gathered(), {{CE::Marker(MarkerForTest(K::kNodeLeft, 0, 0, 143)), kNothing},
                           {CE::Bye(0, 1, 143), kFinish}}),
       P::kDone},
      {"a new node 0 resumes after the highest epoch the nodes ran",
       {{CE::Join(1, Reg(1, 1, 0)), kNothing},
        {CE::Join(1, Reg(2, 1, 0)), kNothing},
        {CE::Join(1, Reg(0)),
         {"Log[node 0 came back: resuming the job at epoch 1 (the nodes ran epoch 0 with the "
          "previous node 0)]",
          "BeginAttempt(1)", "PublishPlan(1)", "Admit(0/1)(1)", "Admit(1/1)(1)", "Admit(2/1)(1)",
          "WatchEpoch(1)"}}},
       P::kRunning},
      {"a new node 0 with no restart left ends the job",
       {{CE::Join(1, Reg(1, 1, 1)), kNothing},
        {CE::Join(1, Reg(2, 1, 0)), kNothing},
        {CE::Join(1, Reg(0)),
         {"PublishAbort(2)", "Refuse(0/1)(2)", "Refuse(1/1)(2)", "Refuse(2/1)(2)"}}},
       P::kFinishing},
      {"a node lost while finishing is only logged; silence after bye is not loss",
       Concat(Gathered(),
              {{CE::Marker(MarkerForTest(K::kRankFailed, 0, 0, 7)), kNothing},
               {CE::Reaped(0, 0), kNothing},
               {CE::Reaped(0, 1), kNothing},
               {CE::Reaped(0, 2), {"BeginAttempt(1)", "PublishPlan(1)", "WatchEpoch(1)"}},
               {CE::Marker(MarkerForTest(K::kRankFailed, 1, 0, 7)), kNothing},
               {CE::Bye(0, 1, 7), kNothing},
               {CE::NodeSilent(0, 1, "x"), kNothing},
               {CE::NodeSilent(1, 1, "no heartbeat for 3.0 s"),
                {"Log[node 1 (h1, 198.18.0.2) was lost: no heartbeat for 3.0 s before it "
                 "said bye]"}},
               {CE::Bye(2, 1, 7), kFinish}}),
       P::kDone},
      {"done reports of another epoch or after a marker do not publish success",
       Concat(Gathered(), {{CE::Done(1, 0), kNothing},
                           {CE::Marker(MarkerForTest(K::kNodeLeft, 0, 1, 143)), kNothing},
                           {CE::Done(0, 0), kNothing},
                           {CE::Done(0, 1), kNothing},
                           {CE::Done(0, 2), kNothing}}),
       P::kRestarting},
  };
  for (const CoordinatorRow& row : rows) {
    SECTION(row.name) {
      CoordinatorConfig config;
      config.nnodes = 3;
      config.max_restarts = 1;
      config.node0 = Reg(0);
      config.rdzv_timeout_s = 60;
      CoordinatorState state;
      int i = 0;
      for (const auto& [event, expected] : row.steps) {
        INFO("step " << i++);
        CoordinatorStep step = Step(state, config, event);
        CHECK(Names(step.actions) == expected);
        CHECK(UnnamedChanges(state, step.state).empty());
        state = step.state;
      }
      CHECK(state.phase == row.final_phase);
    }
  }
}

TEST_CASE("coordinator policy: the plans and aborts carry the details", "[coordinator_policy]") {
  CoordinatorConfig config;
  config.nnodes = 3;
  config.max_restarts = 1;
  config.node0 = Reg(0);
  config.rdzv_timeout_s = 60;
  CoordinatorState s;
  s = Step(s, config, CE::Join(1, Reg(0))).state;
  s = Step(s, config, CE::Join(1, Reg(2, 3))).state;
  CoordinatorStep go = Step(s, config, CE::Join(1, Reg(1, 2)));
  REQUIRE(go.actions.size() == 5);
  const JobPlan& plan = go.actions[0].plan;
  CHECK(plan.epoch == 0);
  CHECK(plan.world_size == 6);
  REQUIRE(plan.nodes.size() == 3);
  CHECK(plan.nodes[1].rank_offset == 1);
  CHECK(plan.nodes[2].rank_offset == 3);

  CoordinatorState gathering;
  gathering = Step(gathering, config, CE::Join(1, Reg(0))).state;
  CoordinatorStep timeout = Step(gathering, config, CE::RendezvousTimeout());
  REQUIRE(timeout.actions.size() == 2);
  REQUIRE(timeout.actions[0].plan.abort.has_value());
  const StopMarker& abort = *timeout.actions[0].plan.abort;
  CHECK(abort.kind == K::kJobError);
  CHECK(abort.exit_code == 3);
  CHECK_THAT(abort.what, Catch::StartsWith("nodes 1 and 2 of 3 did not join within 60 s"));

  CoordinatorStep bad = Step(gathering, config, CE::Join(1, [] {
                               NodeRegistration r = Reg(2);
                               r.nnodes = 2;
                               return r;
                             }()));
  REQUIRE(bad.actions.size() == 3);
  CHECK(bad.actions[0].plan.abort->exit_code == 2);
  CHECK_THAT(bad.actions[0].plan.abort->what,
             Catch::Contains("expects 2 nodes but node 0 (h0, 198.18.0.1) expects 3"));

  CoordinatorState running = go.state;
  CoordinatorStep silent = Step(running, config, CE::NodeSilent(2, 1, "no heartbeat for 3.1 s"));
  REQUIRE(silent.actions.size() == 1);
  CHECK(Describe(silent.actions[0].marker) ==
        "node 2 (h2, 198.18.0.3) was lost: no heartbeat for 3.1 s");
}

TEST_CASE("coordinator policy: node 0 backs off a crash loop for the whole job",
          "[coordinator_policy]") {
  using P = CoordinatorState::Phase;
  CoordinatorConfig config;
  config.nnodes = 3;
  config.max_restarts = 5;
  config.node0 = Reg(0);
  config.rdzv_timeout_s = 60;
  config.backoff = DefaultBackoffForTest();
  const std::vector<std::string> kGo1 = {"BeginAttempt(1)", "PublishPlan(1)", "WatchEpoch(1)"};
  const std::vector<std::string> kGo2 = {"BeginAttempt(2)", "PublishPlan(2)", "WatchEpoch(2)"};
  const std::vector<std::string> kGo3 = {"BeginAttempt(3)", "PublishPlan(3)", "WatchEpoch(3)"};
  const std::vector<std::pair<CoordinatorEvent, std::vector<std::string>>> steps =
      Concat(Gathered(),
             {// epoch 0 fails at once: restart 1 at once
              {CE::Marker(MarkerForTest(K::kRankFailed, 0, 1, 7), 0.2), kNothing},
              {CE::Reaped(0, 0), kNothing},
              {CE::Reaped(0, 1), kNothing},
              {CE::Reaped(0, 2), kGo1},
              // epoch 1 fails at once too: every node waits 1 s for the plan of epoch 2
              {CE::Marker(MarkerForTest(K::kRankFailed, 1, 1, 7), 0.3), kNothing},
              {CE::Reaped(1, 0), kNothing},
              {CE::Reaped(1, 1), kNothing},
              {CE::Reaped(1, 2), {"ArmBackoff(2, 1 s)"}},
              {CE::MissingTick(), kNothing},
              {CE::BackoffOver(1), kNothing},  // stale: not the epoch it waits for
              {CE::BackoffOver(2), kGo2},
              {CE::BackoffOver(2),
               kNothing},  // once only
                           // epoch 2 ran two minutes: the streak resets, restart 3 at once
              {CE::Marker(MarkerForTest(K::kRankFailed, 2, 1, 7), 120), kNothing},
              {CE::Reaped(2, 0), kNothing},
              {CE::Reaped(2, 1), kNothing},
              {CE::Reaped(2, 2), kGo3}});
  CoordinatorState state;
  int i = 0;
  for (const auto& [event, expected] : steps) {
    INFO("step " << i++);
    CoordinatorStep step = Step(state, config, event);
    CHECK(Names(step.actions) == expected);
    CHECK(UnnamedChanges(state, step.state).empty());
    for (const CoordinatorAction& a : step.actions) {
      if (a.kind != CoordinatorAction::Kind::kPublishPlan) continue;
      // The plan tells every node the wait it took (their logs and restart events).
      CHECK(a.plan.backoff_s == (a.epoch == 2 ? 1.0 : 0.0));
    }
    state = step.state;
  }
  CHECK(state.phase == P::kRunning);
  CHECK(state.epoch == 3);

  // A node lost during the wait: the epoch starts once it is back, without a second wait.
  CoordinatorState waiting;
  for (const auto& [event, expected] : steps) {
    waiting = Step(waiting, config, event).state;
    if (waiting.backoff_armed) break;
  }
  REQUIRE(waiting.backoff_armed);
  waiting = Step(waiting, config, CE::NodeSilent(2, 1, "no heartbeat for 3.0 s")).state;
  CHECK(Names(Step(waiting, config, CE::BackoffOver(2)).actions).empty());
  waiting = Step(waiting, config, CE::BackoffOver(2)).state;
  CHECK(Names(Step(waiting, config, CE::Join(2, Reg(2, 3, 1))).actions) ==
        std::vector<std::string>{"Log[node 2 (h2, 198.18.0.3) is back (the same gculaunch)]",
                                 "BeginAttempt(2)", "PublishPlan(2)", "Admit(2/2)(2)",
                                 "WatchEpoch(2)"});

  // --restart-backoff off: never a wait.
  config.backoff = MakeBackoff(0, 0);
  CoordinatorState off;
  for (const auto& [event, expected] : steps) {
    if (event.kind == CoordinatorEvent::Kind::kBackoffOver) continue;
    const CoordinatorStep step = Step(off, config, event);
    for (const CoordinatorAction& a : step.actions) {
      CHECK(a.kind != CoordinatorAction::Kind::kArmBackoff);
    }
    off = step.state;
  }
  CHECK(off.epoch == 3);
}

TEST_CASE("coordinator policy: node 0 ends the loop for the job on the same failure",
          "[coordinator_policy]") {
  CoordinatorConfig config;
  config.nnodes = 3;
  config.max_restarts = 9;
  config.node0 = Reg(0);
  config.rdzv_timeout_s = 60;
  config.streak = StreakConfig{3, "", 10};
  const std::string sig = "exit code 7: KeyError: 'lr'";
  const AttemptReport failed{sig, std::nullopt};
  // Epoch e fails on node 1 at once; every node reaps, node 1 with the signature.
  auto epoch = [&](int e, double ran_s, const AttemptReport& report, bool restarts) {
    std::vector<std::pair<CoordinatorEvent, std::vector<std::string>>> steps = {
        {CE::Marker(MarkerForTest(K::kRankFailed, e, 1, 7), ran_s), kNothing},
        {CE::Reaped(e, 0), kNothing},
        {CE::Reaped(e, 1, report), kNothing},
        {CE::Reaped(e, 2), kNothing}};
    const std::string next = std::to_string(e + 1);
    steps.back().second =
        restarts ? std::vector<std::string>{"BeginAttempt(" + next + ")",
                                            "PublishPlan(" + next + ")", "WatchEpoch(" + next + ")"}
                 : std::vector<std::string>{"PublishAbort(" + next + ")"};
    return steps;
  };
  std::vector<std::pair<CoordinatorEvent, std::vector<std::string>>> steps = Gathered();
  for (int e = 0; e < 3; ++e) steps = Concat(steps, epoch(e, 0.5, failed, true));
  steps = Concat(steps, epoch(3, 0.5, failed, false));
  CoordinatorState state;
  std::optional<StopMarker> abort;
  int i = 0;
  for (const auto& [event, expected] : steps) {
    INFO("step " << i++);
    CoordinatorStep step = Step(state, config, event);
    CHECK(Names(step.actions) == expected);
    CHECK(UnnamedChanges(state, step.state).empty());
    for (const CoordinatorAction& a : step.actions) {
      if (a.plan.abort) abort = a.plan.abort;
    }
    state = step.state;
  }
  REQUIRE(abort);
  CHECK(abort->kind == K::kSameFailure);
  CHECK(abort->epoch == 4);
  CHECK_FALSE(abort->restartable);
  CHECK(Describe(*abort) ==
        "the same failure 4 times in a row: " + sig + "; not restarting (--max-same-failures)");
  CHECK(ExitCodeFor(*abort, 0) == 7);
  CHECK(ExitCodeFor(*abort, 2) == 7);
  CHECK(KindName(abort->kind) == "same_failure");
  CHECK(state.phase == CoordinatorState::Phase::kFinishing);

  // A failure that differs each time, or slow attempts: every restart is used.
  for (int variant = 0; variant < 2; ++variant) {
    INFO((variant == 0 ? "different failures" : "slow attempts"));
    std::vector<std::pair<CoordinatorEvent, std::vector<std::string>>> go = Gathered();
    for (int e = 0; e < 5; ++e) {
      const AttemptReport report{variant == 0 ? sig + std::to_string(e) : sig, std::nullopt};
      go = Concat(go, epoch(e, variant == 0 ? 0.5 : 30, report, true));
    }
    CoordinatorState s;
    for (const auto& [event, expected] : go) {
      CoordinatorStep step = Step(s, config, event);
      CHECK(Names(step.actions) == expected);
      CHECK(UnnamedChanges(s, step.state).empty());
      s = step.state;
    }
    CHECK(s.epoch == 5);
  }

  // --progress-file: the highest number any node read; it stops rising, the job ends.
  config.streak = StreakConfig{2, "ckpt/step", 10};
  std::vector<std::pair<CoordinatorEvent, std::vector<std::string>>> progress = Gathered();
  const std::vector<std::vector<std::optional<std::int64_t>>> numbers = {
      {std::nullopt, 10, std::nullopt}, {30, 10, std::nullopt}, {30, 20, 5}, {30, 30, 30}};
  for (int e = 0; e < 4; ++e) {
    std::vector<std::pair<CoordinatorEvent, std::vector<std::string>>> ep =
        epoch(e, 600, AttemptReport{"exit code 7: e" + std::to_string(e), numbers[e][1]}, e < 3);
    ep[1].first = CE::Reaped(e, 0, AttemptReport{"", numbers[e][0]});
    ep[3].first = CE::Reaped(e, 2, AttemptReport{"", numbers[e][2]});
    progress = Concat(progress, ep);
  }
  CoordinatorState p;
  abort.reset();
  for (const auto& [event, expected] : progress) {
    CoordinatorStep step = Step(p, config, event);
    CHECK(Names(step.actions) == expected);
    CHECK(UnnamedChanges(p, step.state).empty());
    for (const CoordinatorAction& a : step.actions) {
      if (a.plan.abort) abort = a.plan.abort;
    }
    p = step.state;
  }
  REQUIRE(abort);
  CHECK(Describe(*abort) ==
        "the progress file ckpt/step did not advance in 3 failed attempts in a row (no number "
        "above 30); not restarting (--max-same-failures, --progress-file)");
}

TEST_CASE("coordinator policy: node lists for messages", "[coordinator_policy]") {
  CHECK(JoinNodes({}).empty());
  CHECK(JoinNodes({3}) == "3");
  CHECK(JoinNodes({1, 2}) == "1 and 2");
  CHECK(JoinNodes({1, 2, 5}) == "1, 2 and 5");
}

// Elastic (--nnodes 2:3): node ids in join order, the last call, a free join, losses that
// cost one restart each, and a job below MIN that ends at the join timeout.
TEST_CASE("coordinator policy: an elastic job starts at the last call, grows and shrinks",
          "[coordinator_policy]") {
  CoordinatorConfig config;
  config.nnodes = 3;
  config.min_nodes = 2;
  config.max_restarts = 3;
  config.rdzv_timeout_s = 60;
  const auto reg = [](int id) {
    NodeRegistration r = Reg(id);
    r.min_nodes = 2;
    r.max_restarts = 3;
    return r;
  };
  config.node0 = reg(0);
  const auto ids = [](const JobPlan& plan) {
    std::vector<int> out;
    for (const PlanNode& n : plan.nodes) out.push_back(n.id);
    return out;
  };
  CoordinatorState s;
  s = Step(s, config, CE::Join(1, reg(0))).state;
  CoordinatorStep min = Step(s, config, CE::Join(1, reg(1)));
  REQUIRE(Names(min.actions).size() == 2);
  CHECK(Names(min.actions)[0] == "ArmLastCall");
  CoordinatorStep go = Step(min.state, config, CE::LastCall());
  REQUIRE(go.actions.size() == 4);
  CHECK(ids(go.actions[0].plan) == std::vector<int>{0, 1});
  CHECK(go.actions[0].plan.world_size == 2);

  // A third node arrives while epoch 0 runs: a node_joined marker, no restart used.
  CoordinatorStep joined = Step(go.state, config, CE::Join(1, reg(2)));
  REQUIRE(joined.actions.size() == 1);
  CHECK(ActionName(joined.actions[0]) == "PublishMarker(0)[node_joined]");
  CHECK(Restartable(joined.actions[0].marker, 0));  // free even without restarts
  s = Step(joined.state, config, CE::Marker(joined.actions[0].marker)).state;
  s = Step(s, config, CE::Reaped(0, 0)).state;
  CoordinatorStep grown = Step(s, config, CE::Reaped(0, 1));
  CHECK(Names(grown.actions) == std::vector<std::string>{"BeginAttempt(1)", "PublishPlan(1)",
                                                         "Admit(2/1)(1)", "WatchEpoch(1)"});
  CHECK(ids(grown.actions[1].plan) == std::vector<int>{0, 1, 2});
  CHECK(RestartsOf(grown.actions[1].plan) == 0);

  // A fourth node while the job runs at MAX waits for room.
  CoordinatorStep full = Step(grown.state, config, CE::Join(1, reg(3)));
  REQUIRE(full.actions.size() == 1);
  CHECK_THAT(full.actions[0].text, Catch::Contains("waits for room"));

  // Node 1 is lost: one restart.  The members that stay keep their order (0, 2: node 2 is
  // now node rank 1) and the waiting node 3 is appended.
  CoordinatorStep lost = Step(full.state, config, CE::NodeSilent(1, 1, "no heartbeat"));
  REQUIRE(lost.actions.size() == 1);
  CHECK(lost.actions[0].marker.kind == StopMarker::Kind::kNodeLost);
  s = Step(lost.state, config, CE::Marker(lost.actions[0].marker)).state;
  s = Step(s, config, CE::Reaped(1, 0)).state;
  CoordinatorStep shrunk = Step(s, config, CE::Reaped(1, 2));
  REQUIRE(shrunk.actions.size() == 4);
  CHECK(ids(shrunk.actions[1].plan) == std::vector<int>{0, 2, 3});
  CHECK(RestartsOf(shrunk.actions[1].plan) == 1);
  CHECK(shrunk.actions[1].plan.nodes[1].node_rank == 1);

  // Two lost at once: one node left, below MIN: no plan; the join timeout ends the job.
  s = shrunk.state;
  CoordinatorStep lost2 = Step(s, config, CE::NodeSilent(2, 1, "no heartbeat"));
  s = Step(lost2.state, config, CE::Marker(lost2.actions[0].marker)).state;
  s = Step(s, config, CE::NodeSilent(3, 1, "hung up")).state;
  CoordinatorStep waiting = Step(s, config, CE::Reaped(2, 0));
  CHECK(waiting.actions.empty());
  CoordinatorStep ended = Step(waiting.state, config, CE::RejoinTimeout(2));
  REQUIRE_FALSE(ended.actions.empty());
  REQUIRE(ended.actions[0].plan.abort.has_value());
  CHECK(ExitCodeFor(*ended.actions[0].plan.abort, 0) == 4);
  CHECK_THAT(ended.actions[0].plan.abort->what,
             Catch::Contains("1 node(s) remain of the 2 the job needs"));
}

// Elastic: the join deadline passes while MIN nodes are in but the last call is still open
// (last_call_timeout longer than --rdzv-timeout, or a new leader adopting the job): the job
// starts with the nodes it has instead of failing "2 joined but the job needs 2".
TEST_CASE("coordinator policy: an elastic job with MIN present starts at the join deadline",
          "[coordinator_policy]") {
  CoordinatorConfig config;
  config.nnodes = 3;
  config.min_nodes = 2;
  config.max_restarts = 3;
  config.rdzv_timeout_s = 30;
  const auto reg = [](int id) {
    NodeRegistration r = Reg(id);
    r.min_nodes = 2;
    r.max_restarts = 3;
    return r;
  };
  config.node0 = reg(0);
  CoordinatorState s;
  s = Step(s, config, CE::Join(1, reg(0))).state;
  s = Step(s, config, CE::Join(1, reg(1))).state;
  CoordinatorStep deadline = Step(s, config, CE::RendezvousTimeout());
  REQUIRE_FALSE(deadline.actions.empty());
  CHECK(Names(deadline.actions)[0] == "PublishPlan(0)");
  CHECK(deadline.actions[0].plan.world_size == 2);
  CHECK_FALSE(deadline.actions[0].plan.abort.has_value());

  // Below MIN the deadline still ends the job (exit 3).
  CoordinatorState one;
  one = Step(one, config, CE::Join(1, reg(0))).state;
  CoordinatorStep alone = Step(one, config, CE::RendezvousTimeout());
  REQUIRE_FALSE(alone.actions.empty());
  REQUIRE(alone.actions[0].plan.abort.has_value());
  CHECK(alone.actions[0].plan.abort->exit_code == 3);
}

// MIN = MAX is a fixed size on the elastic path (drawn ids, node ranks per plan): a job on
// etcd, or c10d without node ranks; no last call, the job starts when all N are in.  (A
// fixed-size job whose node ranks are given is min_nodes 0: not elastic.)
TEST_CASE("coordinator policy: MIN = MAX is a fixed size on the elastic path",
          "[coordinator_policy]") {
  CoordinatorConfig config;
  config.nnodes = 3;
  config.min_nodes = 0;
  CHECK_FALSE(config.elastic());
  config.min_nodes = 3;
  config.max_restarts = 1;
  const auto reg = [](int id) {
    NodeRegistration r = Reg(id);
    r.min_nodes = 3;
    return r;
  };
  config.node0 = reg(0);
  CHECK(config.elastic());
  CHECK(Elastic(reg(1)));
  CoordinatorState s;
  s = Step(s, config, CE::Join(1, reg(0))).state;
  CoordinatorStep two = Step(s, config, CE::Join(1, reg(1)));
  CHECK(two.actions.empty());  // two of three: no last call
  CHECK(Names(Step(two.state, config, CE::Join(1, reg(2))).actions) == kGo0);
}

// c10d without node ranks (MIN = MAX on the built-in store): the waiting line says who hosts
// the store and why; a node beyond N is refused; a node lost is replaced by a newcomer that
// takes its node rank, while the others keep theirs.
TEST_CASE("coordinator policy: c10d without node ranks keeps ranks and refuses beyond N",
          "[coordinator_policy]") {
  CoordinatorConfig config;
  config.nnodes = 3;
  config.min_nodes = 3;
  config.max_restarts = 2;
  config.host_why = "198.18.0.1 is an address of interface eth0";
  const auto reg = [](int id) {
    NodeRegistration r = Reg(id);
    r.min_nodes = 3;
    r.max_restarts = 2;
    return r;
  };
  config.node0 = reg(0);
  REQUIRE(config.fixed_at_rendezvous());
  const auto ids = [](const JobPlan& plan) {
    std::vector<int> out;
    for (const PlanNode& n : plan.nodes) out.push_back(n.id);
    return out;
  };
  CoordinatorState s;
  s = Step(s, config, CE::Join(1, reg(0))).state;
  s = Step(s, config, CE::Join(1, reg(1))).state;
  CHECK(Names(Step(s, config, CE::MissingTick()).actions) ==
        std::vector<std::string>{
            "LogMissing[waiting for 1 more node to join (2 of 3 present, node ranks assigned at "
            "rendezvous; this node hosts the store: 198.18.0.1 is an address of interface "
            "eth0)]"});
  CoordinatorStep go = Step(s, config, CE::Join(1, reg(2)));
  CHECK(Names(go.actions) == kGo0);

  // A fourth node while the three run: refused at once, and forgotten.
  CoordinatorStep full = Step(go.state, config, CE::Join(1, reg(3)));
  REQUIRE(full.actions.size() == 2);
  CHECK(ActionName(full.actions[0]) == "Refuse(3/1)(0)");
  CHECK(full.actions[0].plan.abort->what ==
        "refused: the job is full: its 3 nodes (--nnodes 3) have joined (fix: start at most 3 "
        "nodes with this rendezvous endpoint and id, or use --nnodes MIN:MAX to keep spare "
        "nodes)");
  CHECK(full.state.members.count(3) == 0);

  // Node 1 (node rank 1) is lost: the job waits for a replacement, which takes node rank 1;
  // node 2 keeps node rank 2.
  CoordinatorStep lost = Step(full.state, config, CE::NodeSilent(1, 1, "no heartbeat"));
  REQUIRE(lost.actions.size() == 1);
  s = Step(lost.state, config, CE::Marker(lost.actions[0].marker)).state;
  s = Step(s, config, CE::Reaped(0, 0)).state;
  CoordinatorStep waiting = Step(s, config, CE::Reaped(0, 2));
  CHECK(waiting.actions.empty());
  CoordinatorStep replaced = Step(waiting.state, config, CE::Join(1, reg(4)));
  REQUIRE(replaced.actions.size() == 4);
  CHECK(Names(replaced.actions)[1] == "PublishPlan(1)");
  CHECK(ids(replaced.actions[1].plan) == std::vector<int>{0, 4, 2});
  CHECK(replaced.actions[1].plan.nodes[1].node_rank == 1);
  CHECK(replaced.actions[1].plan.nodes[2].node_rank == 2);
  CHECK(RestartsOf(replaced.actions[1].plan) == 1);

  // Without node ranks kept (the elastic rule), the survivors would close up: 0, 2, 4.
  CoordinatorConfig elastic = config;
  elastic.min_nodes = 2;
  CHECK_FALSE(elastic.fixed_at_rendezvous());
}

// On etcd a takeover is a new leader elected for the term, not node 0 coming back: its
// messages say so (the built-in wording is in the coordinator's table above).
TEST_CASE("coordinator policy: on etcd a new leader takes over in its own words",
          "[coordinator_policy]") {
  CoordinatorConfig config;
  config.nnodes = 3;
  config.min_nodes = 3;
  config.max_restarts = 1;
  config.elected_leader = true;
  const auto reg = [](int id, int last_epoch) {
    NodeRegistration r = Reg(id, 1, last_epoch);
    r.min_nodes = 3;
    return r;
  };
  config.node0 = reg(0, -1);
  CoordinatorState s;
  s = Step(s, config, CE::Join(1, reg(1, 0))).state;
  s = Step(s, config, CE::Join(1, reg(2, 0))).state;
  CoordinatorStep took = Step(s, config, CE::Join(1, reg(0, -1)));
  REQUIRE_FALSE(took.actions.empty());
  CHECK(Names(took.actions).front() ==
        "Log[this node took over as the job's leader: resuming the job at epoch 1 (the nodes ran "
        "epoch 0 under the previous leader)]");

  CoordinatorState spent;  // a node already ran epoch 1: the one restart is used
  spent = Step(spent, config, CE::Join(1, reg(1, 1))).state;
  spent = Step(spent, config, CE::Join(1, reg(2, 0))).state;
  CoordinatorStep over = Step(spent, config, CE::Join(1, reg(0, -1)));
  REQUIRE_FALSE(over.actions.empty());
  CHECK(Names(over.actions).front() == "PublishAbort(2)");
  REQUIRE(over.actions.front().plan.abort.has_value());
  CHECK(over.actions.front().plan.abort->what ==
        "a new leader took over, but the job has used all 1 restart(s)");
}

}  // namespace gculaunch::job
