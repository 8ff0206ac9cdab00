// DumpGatherer and DumpResponder (launcher/cluster/dump_exchange.h) over a real store: node 0's
// board in-process, node 1's agent board over loopback.
#include "launcher/cluster/dump_exchange.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "tests/launcher/cluster/job_fixture.h"

namespace gculaunch {
namespace {

using std::chrono::milliseconds;

struct DumpFixture : testing::JobFixture {
  DumpFixture() : JobFixture(2) {
    StartCoordinator();
    AddNode(0, 1);
    AddNode(1, 1);
    REQUIRE(testing::RunUntil(io, [&] { return nodes[1].ranks->running; }));
  }

  /// Node 1's responder; each answer names its ranks' stacks "dump <k>" for the k-th dump.
  DumpResponder& StartResponder() {
    responder.emplace(
        io, *nodes[1].board,
        [this](const std::function<void(NodeStacks)>& done) {
          ++dumps;
          StackDump dump;
          dump.rank = 1;
          dump.ok = true;
          dump.text = "dump " + std::to_string(dumps);
          done(NodeStacks{1, "node 1", {dump}, ""});
        },
        milliseconds(20));
    responder->Start();
    return *responder;
  }

  int dumps = 0;
  std::optional<DumpResponder> responder;
};

TEST_CASE("a request made before the responder's first read is answered", "[dump_exchange]") {
  DumpFixture f;
  // Node 0 asks while node 1's link is still coming up: the responder has not read yet.
  const int request = f.board->RequestDump();
  REQUIRE(request == 1);
  DumpResponder& responder = f.StartResponder();
  REQUIRE(testing::RunUntil(f.io, [&] { return responder.answered() == 1; }));
  const auto answer = f.board->DumpAnswer(1, 1);
  REQUIRE(answer.has_value());
  auto decoded = DecodeNodeStacks(*answer);
  REQUIRE(decoded.ok());
  REQUIRE(decoded->dumps.size() == 1);
  CHECK(decoded->dumps[0].text == "dump 1");
}

TEST_CASE("the gatherer gets every request's answer once and names a node that never answers",
          "[dump_exchange]") {
  DumpFixture f;
  DumpResponder& responder = f.StartResponder();
  DumpGatherer gatherer(f.io, *f.board);
  for (int round = 1; round <= 2; ++round) {
    std::optional<std::vector<NodeStacks>> parts;
    gatherer.Gather({1, 2}, milliseconds(1500),
                    [&](std::vector<NodeStacks> got) { parts = std::move(got); });
    REQUIRE(testing::RunUntil(f.io, [&] { return parts.has_value(); }));
    REQUIRE(parts->size() == 2);
    CHECK((*parts)[0].node_rank == 1);
    CHECK((*parts)[0].missing.empty());
    REQUIRE((*parts)[0].dumps.size() == 1);
    CHECK((*parts)[0].dumps[0].text == "dump " + std::to_string(round));
    CHECK((*parts)[1].node_rank == 2);
    CHECK((*parts)[1].missing.find("no answer within 1 s") == 0);
    // Gathered: the request's answer key is gone from the store.
    CHECK_FALSE(f.board->DumpAnswer(round, 1).has_value());
  }
  CHECK(responder.answered() == 2);
  CHECK(f.dumps == 2);
}

TEST_CASE("an answer that comes after the bound is deleted when the next request starts",
          "[dump_exchange]") {
  DumpFixture f;
  DumpGatherer gatherer(f.io, *f.board);
  std::optional<std::vector<NodeStacks>> parts;
  gatherer.Gather({1}, milliseconds(0),
                  [&](std::vector<NodeStacks> got) { parts = std::move(got); });
  REQUIRE(testing::RunUntil(f.io, [&] { return parts.has_value(); }));
  CHECK_FALSE((*parts)[0].missing.empty());
  DumpResponder& responder = f.StartResponder();  // answers request 1, too late
  REQUIRE(testing::RunUntil(f.io, [&] { return responder.answered() == 1; }));
  REQUIRE(f.board->DumpAnswer(1, 1).has_value());
  parts.reset();
  gatherer.Gather({1}, milliseconds(1500),
                  [&](std::vector<NodeStacks> got) { parts = std::move(got); });
  CHECK_FALSE(f.board->DumpAnswer(1, 1).has_value());
  REQUIRE(testing::RunUntil(f.io, [&] { return parts.has_value(); }));
  CHECK((*parts)[0].missing.empty());
  CHECK_FALSE(f.board->DumpAnswer(2, 1).has_value());
}

}  // namespace
}  // namespace gculaunch
