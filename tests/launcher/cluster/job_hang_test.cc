#include "launcher/cluster/job_hang.h"

#include <catch2/catch.hpp>

namespace gculaunch::job {
namespace {

const std::nullopt_t none = std::nullopt;

RankProgress Rank(int rank, std::optional<double> output, std::optional<double> beat,
                  double since_start = 100, bool running = true) {
  RankProgress p;
  p.local_rank = rank % 2;
  p.rank = rank;
  p.running = running;
  p.output_age_s = output;
  p.heartbeat_age_s = beat;
  p.since_start_s = since_start;
  return p;
}

// Node `node`'s report for `epoch`, seen by node 0 `seen_age` seconds ago.
SeenProgress Seen(int node, int epoch, std::vector<RankProgress> ranks, double seen_age = 0) {
  NodeProgress report;
  report.node = node;
  report.epoch = epoch;
  report.seq = 7;
  report.timeout_s = 3;
  report.ranks = std::move(ranks);
  return SeenProgress{node, report, seen_age};
}

SeenProgress Never(int node) { return SeenProgress{node, std::nullopt, 0}; }

std::string Dump(const std::string& inner) {
  return "Current thread 0x00007f0000000002 (most recent call first):\n"
         "  File \"/job/train.py\", line 12 in " +
         inner +
         "\n"
         "  File \"/job/train.py\", line 50 in <module>\n";
}

StackDump Dumped(int rank, const std::string& inner) {
  StackDump d;
  d.rank = rank;
  d.local_rank = rank % 2;
  d.pid = 1000 + rank;
  d.ok = true;
  d.text = Dump(inner);
  return d;
}

}  // namespace

TEST_CASE("job hang: the report period is a tenth of the timeout, longer in a large job",
          "[job_hang]") {
  using std::chrono::milliseconds;
  struct Case {
    double timeout_s;
    int nodes;
    milliseconds period;
  };
  const std::vector<Case> cases = {
      {60, 1, milliseconds(500)},          // a tenth, capped at 500 ms
      {2, 4, milliseconds(200)},           // a tenth
      {0.5, 2, milliseconds(100)},         // at least 100 ms
      {60, 2000, milliseconds(500)},       // 2000 nodes at 500 ms: 4000 reports a second
      {60, 16384, milliseconds(4096)},     // node 0 hears at most 4000 reports a second
      {300, 100000, milliseconds(25000)},  // the same at 100k nodes
      {8, 16384, milliseconds(2000)},      // but never more than a quarter of the timeout
      {1, 16384, milliseconds(250)},
  };
  for (const Case& c : cases) {
    INFO(c.timeout_s << " s, " << c.nodes << " nodes");
    CHECK(HangCheckPeriod(c.timeout_s, c.nodes) == c.period);
  }
}

TEST_CASE("job hang: progress reports round-trip, and the decoder names bad fields", "[job_hang]") {
  NodeProgress report;
  report.node = 3;
  report.epoch = 2;
  report.seq = 12345678901;
  report.timeout_s = 2.5;
  report.ranks = {Rank(6, 0.25, none, 9.5), Rank(7, none, 1.5, 9.5, false)};
  auto back = DecodeProgress(Encode(report));
  REQUIRE(back.ok());
  CHECK(back->node == 3);
  CHECK(back->epoch == 2);
  CHECK(back->seq == 12345678901);
  CHECK(back->timeout_s == 2.5);
  REQUIRE(back->ranks.size() == 2);
  CHECK(back->ranks[0].rank == 6);
  CHECK(back->ranks[0].output_age_s == 0.25);
  CHECK_FALSE(back->ranks[0].heartbeat_age_s);
  CHECK(back->ranks[1].local_rank == 1);
  CHECK_FALSE(back->ranks[1].running);
  CHECK(back->ranks[1].heartbeat_age_s == 1.5);
  CHECK(back->ranks[1].since_start_s == 9.5);

  CHECK(DecodeProgress("nonsense").error().what == "progress report is not a JSON object");
  CHECK(DecodeProgress(R"({"node":1,"epoch":-1,"seq":1,"timeout":3,"ranks":[]})").error().what ==
        "progress report field 'epoch': expected a whole number >= 0");
  CHECK(DecodeProgress(R"({"node":1,"epoch":0,"seq":1,"timeout":3,"ranks":[{"local_rank":0,)"
                       R"("rank":2,"running":true,"output_age":-1,"heartbeat_age":null,)"
                       R"("since_start":1}]})")
            .error()
            .what == "progress report field 'output_age': expected a number >= 0 or null");
  CHECK(DecodeProgress(R"({"node":1,"epoch":0,"seq":1,"timeout":3})").error().hint ==
        "run the same gculaunch version on every node");
}

TEST_CASE("job hang: node 0 decides from every node's reports", "[job_hang]") {
  struct Case {
    const char* name;
    std::vector<RankProgress> own;  ///< node 0's ranks 0 and 1
    std::vector<SeenProgress> others;
    bool hang;
    std::vector<int> unreported;
    std::vector<int> silent;
    std::string why;
  };
  const std::vector<Case> cases = {
      {"every rank of every node quiet for longer than the timeout",
       {Rank(0, 3.5, none), Rank(1, 4.0, none)},
       {Seen(1, 0, {Rank(2, 3.4, none), Rank(3, 5.0, none)})},
       true,
       {},
       {},
       "no progress from any rank for 3.4 s (--hang-timeout 3.0 s)"},
      {"node 0 quiet, a rank of node 1 prints: progress for the job",
       {Rank(0, 20.0, none), Rank(1, 20.0, none)},
       {Seen(1, 0, {Rank(2, 0.3, none), Rank(3, 20.0, none)})},
       false,
       {},
       {},
       ""},
      {"a report grows older by the time since node 0 saw it",
       {Rank(0, 20.0, none), Rank(1, 20.0, none)},
       {Seen(1, 0, {Rank(2, 1.0, none), Rank(3, 20.0, none)}, 2.5)},
       true,
       {},
       {},
       "no progress from any rank for 3.5 s (--hang-timeout 3.0 s)"},
      {"a node that never reported: nothing is decided",
       {Rank(0, 30.0, none), Rank(1, 30.0, none)},
       {Never(1), Seen(2, 0, {Rank(4, 30.0, none)})},
       false,
       {1},
       {},
       ""},
      {"a report of the epoch before does not count",
       {Rank(0, 30.0, none), Rank(1, 30.0, none)},
       {Seen(1, 0, {Rank(2, 30.0, none), Rank(3, 30.0, none)})},
       false,
       {1},
       {},
       ""},
      {"a rank of node 1 whose heartbeat stopped while node 0's beats is flagged alone",
       {Rank(0, none, 0.1), Rank(1, 0.2, none)},
       {Seen(1, 0, {Rank(2, none, 7.0), Rank(3, 0.5, none)})},
       true,
       {},
       {2},
       "rank 2 stopped touching GCULAUNCH_HEARTBEAT_FILE (more than 3.0 s ago) while other "
       "ranks still do"},
      {"start-up: node 1's ranks started later, within the grace",
       {Rank(0, none, none, 50), Rank(1, none, none, 50)},
       {Seen(1, 0, {Rank(2, none, none, 40), Rank(3, none, none, 40)}, 5)},
       false,
       {},
       {},
       ""},
      {"start-up: no rank of any node progressed beyond the grace",
       {Rank(0, none, none, 55), Rank(1, none, none, 55)},
       {Seen(1, 0, {Rank(2, none, none, 58), Rank(3, none, none, 58)}, 3)},
       true,
       {},
       {},
       "no rank has shown any progress in the 61.0 s since the attempt started (--hang-grace "
       "60.0 s)"},
  };
  for (const Case& c : cases) {
    SECTION(c.name) {
      // The "epoch before" case: node 0 runs epoch 1, the report is of epoch 0.
      const int epoch = std::string(c.name).find("epoch before") != std::string::npos ? 1 : 0;
      const JobHangCheck check = CheckJobHang(epoch, c.own, c.others, 3.0, 60.0);
      CHECK(check.unreported == c.unreported);
      CHECK(check.verdict.hang == c.hang);
      CHECK(check.verdict.silent_ranks == c.silent);
      CHECK(check.verdict.why == c.why);
    }
  }
}

TEST_CASE("job hang: the hang marker names the odd rank, its node and its function", "[job_hang]") {
  std::vector<NodeStacks> parts(2);
  parts[0].node_rank = 0;
  parts[0].dumps = {Dumped(0, "all_reduce"), Dumped(1, "all_reduce")};
  parts[1].node_rank = 1;
  parts[1].dumps = {Dumped(2, "stuck_in_my_own_function"), Dumped(3, "all_reduce")};
  const std::string why = "no progress from any rank for 3.1 s (--hang-timeout 3.0 s)";

  const StopMarker stop = HangMarker(4, 2, why, parts, false);
  CHECK(stop.kind == StopMarker::Kind::kHang);
  CHECK(stop.epoch == 4);
  CHECK(RestartsOf(stop) == 2);
  CHECK(stop.exit_code == 6);
  CHECK_FALSE(stop.restartable);
  CHECK(stop.rank == 2);
  CHECK(stop.local_rank == 0);
  CHECK(stop.node == 1);
  CHECK(Describe(stop) ==
        "the job hung: no progress from any rank for 3.1 s (--hang-timeout 3.0 s); rank 2 "
        "(local rank 0) on node 1 differs from the majority: in stuck_in_my_own_function");
  CHECK(ExitCodeFor(stop, 0) == 6);

  const StopMarker restart = HangMarker(0, 0, why, parts, true);
  CHECK(restart.restartable);
  CHECK(Restartable(restart, 1));

  // Every rank in the same place (or a node that did not answer): nobody is named.
  parts[1].dumps[0] = Dumped(2, "all_reduce");
  parts.push_back(NodeStacks{2, "stacks of node 2", {}, "no answer within 20 s"});
  const StopMarker same = HangMarker(0, 0, why, parts, false);
  CHECK(same.what == why);
  CHECK(same.rank == -1);
  CHECK(same.node == -1);
}

}  // namespace gculaunch::job
