#include "launcher/cluster/job_protocol.h"

#include <catch2/catch.hpp>

namespace gculaunch::job {
namespace {

NodeRegistration Reg(int node, int nproc) {
  NodeRegistration r;
  r.node_rank = node;
  r.nnodes = 3;
  r.nproc = nproc;
  r.max_restarts = 1;
  r.run_id = "job-7";
  r.host = "host" + std::to_string(node);
  r.addr = "198.18.0." + std::to_string(node + 1);
  r.pid = 100 + node;
  r.incarnation = "0123abcd" + std::to_string(node);
  r.last_epoch = node - 1;
  return r;
}

StopMarker Failed() {
  StopMarker m;
  m.kind = StopMarker::Kind::kRankFailed;
  m.epoch = 0;
  m.node = 1;
  m.host = "hostb";
  m.addr = "198.18.0.2";
  m.rank = 3;
  m.local_rank = 1;
  m.exit_code = 7;
  m.what = "exit code 7";
  return m;
}

}  // namespace

TEST_CASE("job protocol: key names", "[job_protocol]") {
  CHECK(JoinSeqKey(2) == "job/joinseq/2");
  CHECK(JoinKey(2, 5) == "job/join/2/5");
  CHECK(AdmitKey(2, 5) == "job/admit/2/5");
  CHECK(PlanKey(0) == "job/plan/0");
  CHECK(NodePlanKey(1, 3) == "job/nodeplan/1/3");
  CHECK(StopKey(3) == "job/stop/3");
  CHECK(DoneKey(1, 2) == "job/done/1/2");
  CHECK(ReapedKey(1, 2) == "job/reaped/1/2");
  CHECK(HeartbeatKey(4, 2) == "job/hb/4/2");
  CHECK(ByeKey(0, 1) == "job/bye/0/1");
  CHECK(ProgressKey(2) == "job/progress/2");
  CHECK(KeyForSocket(PlanKey(1)) == "gculaunch/job/plan/1");
}

TEST_CASE("job protocol: registrations, markers and plans round-trip", "[job_protocol]") {
  NodeRegistration reg = Reg(2, 4);
  reg.host = "h\xc3\xa9te \"quoted\"";  // any text survives
  reg.addr = "fe80::1%eth0";
  reg.hang = "--hang-timeout 3 s, --on-hang stop";
  auto back = DecodeRegistration(Encode(reg));
  REQUIRE(back.ok());
  CHECK(*back == reg);

  const StopMarker marker = Failed();
  auto marker_back = DecodeMarker(Encode(marker));
  REQUIRE(marker_back.ok());
  CHECK(*marker_back == marker);

  JobPlan plan = MakePlanForTest({Reg(0, 1), Reg(1, 2), Reg(2, 3)}, 2, 41000);
  plan.backoff_s = 2.5;  // the wait before this epoch (--restart-backoff)
  auto plan_back = DecodePlan(Encode(plan));
  REQUIRE(plan_back.ok());
  CHECK(*plan_back == plan);

  JobPlan abort;
  abort.epoch = 1;
  abort.abort = marker;
  auto abort_back = DecodePlan(Encode(abort));
  REQUIRE(abort_back.ok());
  CHECK(*abort_back == abort);
}

TEST_CASE("job protocol: reaped reports and the same-failure abort round-trip", "[job_protocol]") {
  const AttemptReport report{"exit code 1: KeyError: 'l\xc3\xa9' \"x\"", 1200};
  auto back = DecodeReport(Encode(report));
  REQUIRE(back.ok());
  CHECK(*back == report);
  auto none = DecodeReport(Encode(AttemptReport{}));
  REQUIRE(none.ok());
  CHECK(*none == AttemptReport{});
  // An older gculaunch reports "1": an empty report.
  auto old = DecodeReport("1");
  REQUIRE(old.ok());
  CHECK(*old == AttemptReport{});
  CHECK(DecodeReport(R"({"signature": 3, "progress": null})").error().what ==
        "reaped report field 'signature': expected text");
  CHECK(DecodeReport(R"({"signature": "", "progress": 1.5})").error().what ==
        "reaped report field 'progress': expected a whole number or null");

  StopMarker same = Failed();
  same.kind = StopMarker::Kind::kSameFailure;
  same.restartable = false;
  same.what = "the same failure 4 times in a row: exit code 7; not restarting";
  auto marker = DecodeMarker(Encode(same));
  REQUIRE(marker.ok());
  CHECK(*marker == same);
  CHECK_FALSE(Restartable(same, 100));
  CHECK(ExitCodeFor(same, 0) == same.exit_code);
  CHECK(Describe(same) == same.what);
}

TEST_CASE("job protocol: global ranks in node-rank order, heterogeneous nproc", "[job_protocol]") {
  // Registrations arrive in any order; node 1 has 2 ranks, node 0 one, node 2 three.
  const JobPlan plan = MakePlanForTest({Reg(2, 3), Reg(0, 1), Reg(1, 2)}, 0, 0);
  CHECK(plan.world_size == 6);
  REQUIRE(plan.nodes.size() == 3);
  CHECK(plan.nodes[0] == PlanNode{0, 1, 0, "host0", "198.18.0.1", 0});
  CHECK(plan.nodes[1] == PlanNode{1, 2, 1, "host1", "198.18.0.2", 1});
  CHECK(plan.nodes[2] == PlanNode{2, 3, 3, "host2", "198.18.0.3", 2});
}

TEST_CASE("job protocol: decoders reject what the encoders never write", "[job_protocol]") {
  struct Row {
    const char* text;
    const char* error;
  };
  const Row registrations[] = {
      {"", "node registration is not a JSON object"},
      {"[1,2]", "node registration is not a JSON object"},
      {R"({"node_rank":1})", "field 'nnodes': expected a whole number"},
      {R"({"node_rank":-1,"nnodes":2,"nproc":1,"max_restarts":0,"pid":1,"last_epoch":-1,"incarnation":"i","run_id":"r","host":"h","addr":"a"})",
       "field 'node_rank': expected a number >= 0"},
      {R"({"node_rank":1,"nnodes":2,"nproc":0,"max_restarts":0,"pid":1,"last_epoch":-1,"incarnation":"i","run_id":"r","host":"h","addr":"a"})",
       "field 'nproc': expected a number >= 1"},
      {R"({"node_rank":1,"nnodes":2,"nproc":1,"max_restarts":0,"pid":1,"last_epoch":-1,"incarnation":"i","run_id":5,"host":"h","addr":"a"})",
       "field 'run_id': expected text"},
  };
  for (const Row& row : registrations) {
    INFO(row.text);
    auto r = DecodeRegistration(row.text);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().what, Catch::Contains(row.error));
    CHECK_THAT(r.error().hint, Catch::Contains("same gculaunch version"));
  }
  auto kind = DecodeMarker(R"({"kind":"exploded"})");
  REQUIRE_FALSE(kind.ok());
  CHECK_THAT(kind.error().what, Catch::Contains("unknown kind 'exploded'"));

  // A plan whose offsets do not follow the node order, or whose world size is wrong.
  JobPlan plan = MakePlanForTest({Reg(0, 1), Reg(1, 2)}, 0, 0);
  plan.nodes[1].rank_offset = 5;
  auto bad_offset = DecodePlan(Encode(plan));
  REQUIRE_FALSE(bad_offset.ok());
  CHECK_THAT(bad_offset.error().what, Catch::Contains("out of order"));
  plan = MakePlanForTest({Reg(0, 1), Reg(1, 2)}, 0, 0);
  plan.world_size = 4;
  auto bad_world = DecodePlan(Encode(plan));
  REQUIRE_FALSE(bad_world.ok());
  CHECK_THAT(bad_world.error().what, Catch::Contains("world_size"));
  plan.world_size = 3;
  plan.ranks_port = 70000;
  CHECK_FALSE(DecodePlan(Encode(plan)).ok());
  plan.ranks_port = 0;
  plan.backoff_s = -1;
  auto bad_backoff = DecodePlan(Encode(plan));
  REQUIRE_FALSE(bad_backoff.ok());
  CHECK_THAT(bad_backoff.error().what, Catch::Contains("backoff_s"));
  // A plan from a gculaunch without back-offs (no field) waited nothing.
  plan.backoff_s = 0;
  std::string old = Encode(plan);
  old.replace(old.find("\"backoff_s\":0.0,"), std::string("\"backoff_s\":0.0,").size(), "");
  auto old_back = DecodePlan(old);
  REQUIRE(old_back.ok());
  CHECK(old_back->backoff_s == 0);
}

TEST_CASE("job protocol: a node's own plan holds its entry, the node count and the leader",
          "[job_protocol]") {
  JobPlan whole = MakePlanForTest({Reg(0, 1), Reg(1, 2), Reg(2, 3)}, 2, 41000);
  whole.restarts = 1;
  whole.backoff_s = 0.5;
  const JobPlan own = PlanFor(whole, whole.nodes[2]);
  CHECK(own.epoch == 2);
  CHECK(own.restarts == 1);
  CHECK(own.world_size == 6);
  CHECK(own.ranks_port == 41000);
  CHECK(own.backoff_s == 0.5);
  CHECK(own.nodes == std::vector<PlanNode>{whole.nodes[2]});
  CHECK(NodeCount(own) == 3);
  CHECK(NodeCount(whole) == 3);
  CHECK(LeaderAddr(own) == "198.18.0.1");
  CHECK(LeaderAddr(whole) == "198.18.0.1");
  auto back = DecodePlan(Encode(own));
  REQUIRE(back.ok());
  CHECK(*back == own);
  // Its size grows with nothing: the same bytes for node 2 of 3 as of 3000, give or take digits.
  JobPlan big = whole;
  for (int k = 3; k < 3000; ++k) big.nodes.push_back({k, 1, 3 + k, "h", "198.18.1.1", k});
  big.world_size = 3 + 3000;
  CHECK(Encode(PlanFor(big, big.nodes[2])).size() < Encode(own).size() + 8);

  // What a node's own plan must hold: one entry, inside the job.
  JobPlan two = own;
  two.nodes.push_back(whole.nodes[1]);
  auto bad_two = DecodePlan(Encode(two));
  REQUIRE_FALSE(bad_two.ok());
  CHECK_THAT(bad_two.error().what, Catch::Contains("one node inside the job"));
  JobPlan outside = own;
  outside.nodes[0].node_rank = 3;
  CHECK_FALSE(DecodePlan(Encode(outside)).ok());
  outside = own;
  outside.nodes[0].rank_offset = 4;  // 4 + 3 ranks > WORLD_SIZE 6
  CHECK_FALSE(DecodePlan(Encode(outside)).ok());
  JobPlan none = own;
  none.nodes.clear();
  CHECK_FALSE(DecodePlan(Encode(none)).ok());
  std::string no_leader = Encode(own);
  no_leader.replace(no_leader.find("\"leader_addr\""), 2, "\"x");
  CHECK_FALSE(DecodePlan(no_leader).ok());

  // A registration says whether its gculaunch reads its own plan; an older one's does not.
  NodeRegistration reg = Reg(1, 2);
  reg.node_plans = true;
  auto reg_back = DecodeRegistration(Encode(reg));
  REQUIRE(reg_back.ok());
  CHECK(reg_back->node_plans);
  std::string older = Encode(reg);
  older.replace(older.find(",\"node_plans\":true"), std::string(",\"node_plans\":true").size(), "");
  auto older_back = DecodeRegistration(older);
  REQUIRE(older_back.ok());
  CHECK_FALSE(older_back->node_plans);
  std::string wrong = Encode(reg);
  wrong.replace(wrong.find("true"), 4, "\"yes\"");
  auto wrong_back = DecodeRegistration(wrong);
  REQUIRE_FALSE(wrong_back.ok());
  CHECK_THAT(wrong_back.error().what, Catch::Contains("node_plans"));
}

TEST_CASE("job protocol: a registration must agree with node 0's", "[job_protocol]") {
  const NodeRegistration master = Reg(0, 2);
  CHECK(CheckRegistration(Reg(2, 8), master).ok());  // nproc may differ

  NodeRegistration nnodes = Reg(1, 2);
  nnodes.nnodes = 4;
  auto e1 = CheckRegistration(nnodes, master);
  REQUIRE_FALSE(e1.ok());
  CHECK(e1.error().what ==
        "node 1 (host1, 198.18.0.2) expects 4 nodes but node 0 (host0, 198.18.0.1) expects 3");
  CHECK_THAT(e1.error().hint, Catch::Contains("same number of nodes"));

  // The run id is the job's identity: another one makes a stranger, not a misfit.
  NodeRegistration run = Reg(1, 2);
  run.run_id = "other";
  CHECK(CheckRegistration(run, master).ok());
  CHECK(CheckIdentity(Reg(1, 2), master).ok());
  auto e2 = CheckIdentity(run, master);
  REQUIRE_FALSE(e2.ok());
  CHECK(e2.error().what ==
        "node 1 (host1, 198.18.0.2) belongs to job 'other' but the job at this "
        "MASTER_ADDR:MASTER_PORT is 'job-7'");
  CHECK_THAT(e2.error().hint, Catch::Contains("same run id"));

  NodeRegistration restarts = Reg(2, 2);
  restarts.max_restarts = 3;
  auto e3 = CheckRegistration(restarts, master);
  REQUIRE_FALSE(e3.ok());
  CHECK_THAT(e3.error().what, Catch::Contains("allows 3 restarts but node 0"));
  CHECK_THAT(e3.error().hint, Catch::Contains("--max-restarts"));

  NodeRegistration range = Reg(3, 2);
  auto e4 = CheckRegistration(range, master);
  REQUIRE_FALSE(e4.ok());
  CHECK_THAT(e4.error().what, Catch::Contains("outside 0..2"));

  // --hang-timeout and --on-hang must agree; an older gculaunch that does not say is let in.
  NodeRegistration hang_master = Reg(0, 2);
  hang_master.hang = "--hang-timeout 3 s, --on-hang stop";
  NodeRegistration hang = Reg(1, 2);
  hang.hang = "--hang-timeout 5 s, --on-hang stop";
  auto e5 = CheckRegistration(hang, hang_master);
  REQUIRE_FALSE(e5.ok());
  CHECK(e5.error().what ==
        "node 1 (host1, 198.18.0.2) runs with --hang-timeout 5 s, --on-hang stop but node 0 "
        "(host0, 198.18.0.1) with --hang-timeout 3 s, --on-hang stop");
  CHECK(e5.error().hint == "give every node the same --hang-timeout and --on-hang");
  hang.hang = "no --hang-timeout";
  CHECK_FALSE(CheckRegistration(hang, hang_master).ok());
  hang.hang = hang_master.hang;
  CHECK(CheckRegistration(hang, hang_master).ok());
  hang.hang = "";
  CHECK(CheckRegistration(hang, hang_master).ok());
  // A registration without the field decodes as "" (not compared).
  auto old = DecodeRegistration(
      R"({"node_rank":1,"nnodes":3,"nproc":2,"max_restarts":1,"run_id":"job-7","host":"h",)"
      R"("addr":"a","pid":1,"incarnation":"i","last_epoch":-1})");
  REQUIRE(old.ok());
  CHECK(old->hang.empty());
}

TEST_CASE("job protocol: restart decisions and exit codes per marker", "[job_protocol]") {
  StopMarker failed = Failed();
  CHECK(Restartable(failed, 1));
  failed.epoch = 1;
  CHECK_FALSE(Restartable(failed, 1));  // the budget is job-wide: epoch 1 used it
  CHECK(ExitCodeFor(failed, 0) == 7);
  CHECK(ExitCodeFor(failed, 1) == 7);
  failed.epoch = 0;
  failed.restartable = false;  // the program could not start: restarting cannot help
  CHECK_FALSE(Restartable(failed, 5));

  // A lost node, or one that left, re-forms the job while the budget lasts.
  StopMarker lost;
  lost.kind = StopMarker::Kind::kNodeLost;
  lost.node = 2;
  CHECK(Restartable(lost, 5));
  CHECK_FALSE(Restartable(lost, 0));
  lost.epoch = 5;
  CHECK_FALSE(Restartable(lost, 5));
  CHECK(ExitCodeFor(lost, 0) == 4);

  StopMarker left;
  left.kind = StopMarker::Kind::kNodeLeft;
  left.node = 1;
  left.exit_code = 143;
  CHECK(ExitCodeFor(left, 1) == 143);  // the node that left keeps its own code
  CHECK(ExitCodeFor(left, 0) == 4);
  CHECK(Restartable(left, 1));
  left.restartable = false;  // it gave up (ranks SIGKILL could not stop): it will not return
  CHECK_FALSE(Restartable(left, 1));

  StopMarker success;
  success.kind = StopMarker::Kind::kSuccess;
  CHECK(ExitCodeFor(success, 2) == 0);
  CHECK_FALSE(Restartable(success, 5));

  StopMarker error;
  error.kind = StopMarker::Kind::kJobError;
  error.exit_code = 3;
  CHECK(ExitCodeFor(error, 1) == 3);

  // A hang: --on-hang restart re-forms the job for one restart; stop (or no restart left)
  // ends it with 6 on every node.
  StopMarker hang;
  hang.kind = StopMarker::Kind::kHang;
  hang.node = 1;
  hang.exit_code = 6;
  hang.restartable = true;
  CHECK(Restartable(hang, 1));
  hang.epoch = 1;
  CHECK_FALSE(Restartable(hang, 1));
  hang.epoch = 0;
  hang.restartable = false;
  CHECK_FALSE(Restartable(hang, 5));
  CHECK(ExitCodeFor(hang, 0) == 6);
  CHECK(ExitCodeFor(hang, 1) == 6);
  CHECK(KindName(hang.kind) == "hang");
  auto back = DecodeMarker(Encode(hang));
  REQUIRE(back.ok());
  CHECK(*back == hang);
}

TEST_CASE("job protocol: one-line descriptions name node, host, address and rank",
          "[job_protocol]") {
  CHECK(Describe(Failed()) ==
        "rank 3 (local rank 1) on node 1 (hostb, 198.18.0.2) failed with exit code 7");
  StopMarker lost;
  lost.kind = StopMarker::Kind::kNodeLost;
  lost.node = 2;
  lost.host = "hostc";
  lost.addr = "fd00::3";
  lost.what = "no heartbeat for 3.0 s";
  CHECK(Describe(lost) == "node 2 (hostc, fd00::3) was lost: no heartbeat for 3.0 s");
  StopMarker left;
  left.kind = StopMarker::Kind::kNodeLeft;
  left.node = 0;
  left.what = "its gculaunch received SIGTERM";
  CHECK(Describe(left) == "node 0 left the job: its gculaunch received SIGTERM");
  StopMarker spawn = Failed();
  spawn.restartable = false;
  spawn.what = "not found";
  CHECK(Describe(spawn) ==
        "rank 3 (local rank 1) on node 1 (hostb, 198.18.0.2) could not be started: not found");
  CHECK(NodeName(1, "", "198.18.0.2") == "node 1 (198.18.0.2)");
  StopMarker hang;
  hang.kind = StopMarker::Kind::kHang;
  hang.what = "no progress from any rank for 3.2 s (--hang-timeout 3.0 s)";
  CHECK(Describe(hang) ==
        "the job hung: no progress from any rank for 3.2 s (--hang-timeout 3.0 s)");
}

}  // namespace gculaunch::job

namespace gculaunch::job {
namespace {

TEST_CASE("job protocol: a marker's kind on the wire is its outcome's name, as before",
          "[job_protocol]") {
  // The names every gculaunch since the first multi-node one sends and reads: a node of the
  // previous version decodes these markers (docs/multinode.md).
  const std::pair<StopMarker::Kind, const char*> kWire[] = {
      {StopMarker::Kind::kRankFailed, "rank_failed"},
      {StopMarker::Kind::kNodeLost, "node_lost"},
      {StopMarker::Kind::kNodeLeft, "node_left"},
      {StopMarker::Kind::kSuccess, "success"},
      {StopMarker::Kind::kJobError, "job_error"},
      {StopMarker::Kind::kNodeJoined, "node_joined"},
      {StopMarker::Kind::kHang, "hang"},
      {StopMarker::Kind::kSameFailure, "same_failure"},
  };
  for (const auto& [kind, name] : kWire) {
    INFO(name);
    CHECK(KindName(kind) == name);
    CHECK(OutcomeNamed(name) == OutcomeOfKind(kind));
    StopMarker m;
    m.kind = kind;
    auto decoded = DecodeMarker(Encode(m));
    REQUIRE(decoded.ok());
    CHECK(decoded->kind == kind);
  }
  // A marker written by an older node, by hand: its kind still decodes.
  auto old = DecodeMarker(
      R"({"kind":"node_lost","epoch":2,"node":1,"host":"b","addr":"10.0.0.2","rank":-1,)"
      R"("local_rank":-1,"exit_code":0,"what":"no heartbeat for 3.0 s","restartable":true})");
  REQUIRE(old.ok());
  CHECK(old->kind == StopMarker::Kind::kNodeLost);
  CHECK(old->restarts == -1);
}

}  // namespace
}  // namespace gculaunch::job
