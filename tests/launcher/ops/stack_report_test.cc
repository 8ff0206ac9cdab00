#include "launcher/ops/stack_report.h"

#include <catch2/catch.hpp>

namespace gculaunch {
namespace {

// faulthandler's text for a rank whose main thread is in `inner`, called from main().
std::string Dump(const std::string& inner, int line) {
  return "Thread 0x00007f0000000001 (most recent call first):\n"
         "  File \"/usr/lib/python3/dist-packages/torch/utils/data/_utils/signal_handling.py\", "
         "line 66 in handler\n"
         "\n"
         "Current thread 0x00007f0000000002 (most recent call first):\n"
         "  File \"/job/train.py\", line " +
         std::to_string(line) + " in " + inner +
         "\n"
         "  File \"/job/train.py\", line 40 in main\n"
         "  File \"/job/train.py\", line 50 in <module>\n";
}

StackDump Dumped(int rank, std::string text) {
  StackDump d;
  d.rank = rank;
  d.local_rank = rank;
  d.pid = 1000 + rank;
  d.ok = true;
  d.text = std::move(text);
  return d;
}

}  // namespace

TEST_CASE("stack report: the main thread's frames, innermost first", "[stack_report]") {
  const auto frames = MainThreadFrames(Dump("all_reduce", 12));
  REQUIRE(frames.size() == 3);
  CHECK(frames[0].file == "/job/train.py");
  CHECK(frames[0].line == 12);
  CHECK(frames[0].function == "all_reduce");
  CHECK(frames[2].function == "<module>");
  CHECK(MainThreadFrames("").empty());
  CHECK(MainThreadFrames("garbage\n  File \"x\n").empty());
  // Without a <module> thread: the first thread.
  const auto worker = MainThreadFrames(
      "Thread 0x1 (most recent call first):\n"
      "  File \"w.py\", line 3 in loop\n");
  REQUIRE(worker.size() == 1);
  CHECK(worker[0].function == "loop");
}

TEST_CASE("stack report: the ranks that differ from the majority", "[stack_report]") {
  struct Case {
    const char* name;
    std::vector<StackDump> dumps;
    std::vector<int> odd;
  };
  StackDump failed;
  failed.rank = 3;
  failed.why = "not running";
  const std::vector<Case> cases = {
      {"one stuck rank of four",
       {Dumped(0, Dump("all_reduce", 12)), Dumped(1, Dump("stuck", 20)),
        Dumped(2, Dump("all_reduce", 12)), Dumped(3, Dump("all_reduce", 12))},
       {1}},
      {"line numbers do not count",
       {Dumped(0, Dump("all_reduce", 12)), Dumped(1, Dump("all_reduce", 13)),
        Dumped(2, Dump("all_reduce", 14))},
       {}},
      {"all the same",
       {Dumped(0, Dump("f", 1)), Dumped(1, Dump("f", 1)), Dumped(2, Dump("f", 1))},
       {}},
      {"two ranks: no majority", {Dumped(0, Dump("f", 1)), Dumped(1, Dump("g", 1))}, {}},
      {"a tie: no majority",
       {Dumped(0, Dump("f", 1)), Dumped(1, Dump("g", 1)), Dumped(2, Dump("f", 1)),
        Dumped(3, Dump("g", 1))},
       {}},
      {"ranks not dumped are not odd",
       {Dumped(0, Dump("f", 1)), Dumped(1, Dump("f", 1)), Dumped(2, Dump("g", 1)), failed},
       {2}},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    CHECK(OddRanks(c.dumps) == c.odd);
  }
}

TEST_CASE("stack report: the text", "[stack_report]") {
  StackDump missing;
  missing.rank = 3;
  missing.local_rank = 3;
  missing.why = "not running (exited with code 1)";
  const std::vector<StackDump> dumps = {Dumped(0, Dump("all_reduce", 12)),
                                        Dumped(1, Dump("stuck", 20)),
                                        Dumped(2, Dump("all_reduce", 12)), missing};
  const std::string text = FormatStackReport("stacks of run r1", dumps);
  CHECK(text.rfind("stacks of run r1\n---- rank 0 (local rank 0, pid 1000) ----\nThread 0x", 0) ==
        0);
  CHECK(text.find("---- rank 3 (local rank 3): not dumped: not running (exited with code 1) "
                  "----\n") != std::string::npos);
  CHECK(text.find("rank 1 differs from the majority: in stuck (/job/train.py:20)\n") !=
        std::string::npos);
  CHECK_FALSE(AllDumpedForTest(dumps));
  const std::vector<StackDump> same = {Dumped(0, Dump("f", 1)), Dumped(1, Dump("f", 1))};
  CHECK(AllDumpedForTest(same));
  CHECK(FormatStackReport("t", same).find("every dumped rank is in the same place\n") !=
        std::string::npos);
}

TEST_CASE("stack report: a job's parts, a missing node, the job-wide majority", "[stack_report]") {
  NodeStacks zero{0,
                  "stacks of run r, node 0 (a), gculaunch pid 1",
                  {Dumped(0, Dump("all_reduce", 10)), Dumped(1, Dump("all_reduce", 10))},
                  ""};
  // Node 1's ranks 2 and 3 travel through the board as JSON.
  StackDump not_dumped;
  not_dumped.rank = 3;
  not_dumped.local_rank = 1;
  not_dumped.why = "the hook is not loaded";
  const NodeStacks sent{
      1,
      "stacks of run r, node 1 (b), gculaunch pid 2",
      {Dumped(2, Dump("stuck", 77)), Dumped(4, Dump("all_reduce", 10)), not_dumped},
      ""};
  auto one = DecodeNodeStacks(EncodeNodeStacks(sent));
  REQUIRE(one.ok());
  CHECK(one->node_rank == 1);
  CHECK(one->title == sent.title);
  REQUIRE(one->dumps.size() == 3);
  CHECK(one->dumps[0].text == sent.dumps[0].text);
  CHECK(one->dumps[2].why == "the hook is not loaded");
  CHECK_FALSE(one->dumps[2].ok);
  CHECK_FALSE(DecodeNodeStacks("{nope").ok());
  NodeStacks two{2, "stacks of node 2", {}, "no answer within 20 s"};

  const std::string report = FormatJobStackReport({zero, *one, two});
  CHECK(report.rfind("stacks of run r, node 0 (a), gculaunch pid 1\n---- rank 0 ", 0) == 0);
  CHECK(report.find("\ngculaunch: stacks of run r, node 1 (b), gculaunch pid 2\n---- rank 2 ") !=
        std::string::npos);
  CHECK(report.find("---- rank 3 (local rank 1): not dumped: the hook is not loaded ----\n") !=
        std::string::npos);
  CHECK(report.find("gculaunch: stacks of node 2\n---- node 2: not dumped: no answer within "
                    "20 s ----\n") != std::string::npos);
  // Rank 2 differs from the majority of the whole job (ranks 0, 1 and 4 on two nodes).
  CHECK(report.find("rank 2 differs from the majority: in stuck (/job/train.py:77)\n") !=
        std::string::npos);
}

}  // namespace gculaunch
