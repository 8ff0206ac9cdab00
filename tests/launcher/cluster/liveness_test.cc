#include "launcher/cluster/liveness.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace gculaunch::job {
namespace {

using Ms = std::chrono::milliseconds;

LiveClock::time_point At(int ms) { return LiveClock::time_point{} + Ms(ms); }

// One step of a peer's story, at `ms`: what happened, and whether it is lost afterwards.
struct Step {
  int ms;
  enum What { kTick, kHeard, kExpect, kIdle } what;
  bool lost_after;
};

struct Row {
  std::string name;
  SilenceRule rule;
  std::vector<Step> steps;
};

SilenceRule Rule(int floor_ms, int ceiling_ms) {
  SilenceRule r;
  r.floor = Ms(floor_ms);
  r.ceiling = Ms(ceiling_ms);
  r.multiple = 4;
  return r;
}

}  // namespace

TEST_CASE("liveness: the rule of --node-timeout: half of it as the floor", "[liveness]") {
  const SilenceRule r = SilenceRule::ForNodeTimeout(Ms(30000));
  CHECK(r.ceiling == Ms(30000));
  CHECK(r.floor == Ms(15000));
  CHECK(r.multiple == 4);
  // Node 0, judged by a node, gets the whole timeout whatever the gaps.
  const SilenceRule master = SilenceRule::ForMasterNode(Ms(30000));
  CHECK(master.floor == Ms(30000));
  CHECK(master.ceiling == Ms(30000));
  PeerSilence quick(At(0), {});
  quick.Heard(At(10), {});
  CHECK(quick.Bound(master) == Ms(30000));
}

TEST_CASE("liveness: nodes beat every second, less often in a large job", "[liveness]") {
  CHECK(HeartbeatInterval(2, Ms(30000)) == Ms(1000));
  CHECK(HeartbeatInterval(4000, Ms(30000)) == Ms(1000));  // 4000 beats a second at node 0
  CHECK(HeartbeatInterval(8000, Ms(30000)) == Ms(2000));
  // 16k nodes would be 4.1 s; an eighth of the 30 s timeout caps it.
  CHECK(HeartbeatInterval(16384, Ms(30000)) == Ms(3750));
  CHECK(HeartbeatInterval(16384, Ms(120000)) == Ms(4096));
  // A short --node-timeout keeps the one-second beat, whatever the size.
  CHECK(HeartbeatInterval(16384, Ms(5000)) == Ms(1000));
  CHECK(HeartbeatInterval(0, Ms(30000)) == Ms(1000));
}

TEST_CASE("liveness: own lateness adds up only what came later than the period", "[liveness]") {
  OwnLag lag(Ms(250));
  CHECK(lag.Tick(At(0)) == Ms(0));        // the first tick judges nothing
  CHECK(lag.Tick(At(250)) == Ms(0));      // on time
  CHECK(lag.Tick(At(400)) == Ms(0));      // early
  CHECK(lag.Tick(At(1650)) == Ms(1000));  // stopped or starved for a second
  CHECK(lag.total() == Ms(1000));
  lag.Resume(At(9000));  // not ticking since 1650 ms: not judged
  CHECK(lag.Tick(At(9300)) == Ms(50));
  CHECK(lag.total() == Ms(1050));
}

TEST_CASE("liveness: the table of silences", "[liveness]") {
  using S = Step;
  const std::vector<Row> rows = {
      {"a peer heard every second is never lost",
       Rule(2000, 4000),
       {{1000, S::kHeard, false},
        {2000, S::kHeard, false},
        {3000, S::kHeard, false},
        {4900, S::kTick, false}}},
      {"a silent peer is lost at the floor when its gaps were short",
       Rule(2000, 4000),
       {{500, S::kHeard, false}, {2400, S::kTick, false}, {2500, S::kTick, true}}},
      {"long gaps seen earlier raise the bound: 4 x 800 ms",
       Rule(2000, 4000),
       {{800, S::kHeard, false},
        {1600, S::kHeard, false},
        {4700, S::kTick, false},
        {4800, S::kTick, true}}},
      {"never beyond the ceiling, whatever the gaps",
       Rule(2000, 4000),
       {{3000, S::kHeard, false}, {6900, S::kTick, false}, {7000, S::kTick, true}}},
      {"a floor above the ceiling gives the ceiling",
       Rule(9000, 1000),
       {{900, S::kTick, false}, {1000, S::kTick, true}}},
      {"anything heard ends the silence, even just before the bound",
       Rule(2000, 4000),
       {{1999, S::kHeard, false}, {3999, S::kTick, false}, {4000, S::kHeard, false}}},
      {"an idle peer (nothing asked) is not silent; a question starts the count",
       Rule(2000, 4000),
       {{0, S::kIdle, false},
        {60000, S::kTick, false},
        {60000, S::kExpect, false},
        {61999, S::kTick, false},
        {62000, S::kTick, true}}},
      {"a second question does not restart the count",
       Rule(2000, 4000),
       {{0, S::kIdle, false},
        {100, S::kExpect, false},
        {1500, S::kExpect, false},
        {2100, S::kTick, true}}},
  };
  for (const Row& row : rows) {
    SECTION(row.name) {
      OwnLag lag(Ms(100000));  // no lateness in these rows
      PeerSilence peer(At(0), lag.total());
      for (const Step& step : row.steps) {
        switch (step.what) {
          case S::kTick:
            break;
          case S::kHeard:
            peer.Heard(At(step.ms), lag.total());
            break;
          case S::kExpect:
            peer.Expect(At(step.ms), lag.total());
            break;
          case S::kIdle:
            peer.Idle();
            break;
        }
        INFO("at " << step.ms << " ms");
        CHECK(peer.Lost(At(step.ms), lag.total(), row.rule) == step.lost_after);
      }
    }
  }
}

TEST_CASE("liveness: this process's own lateness is not the peer's silence", "[liveness]") {
  const SilenceRule rule = Rule(2000, 4000);
  OwnLag lag(Ms(250));
  lag.Tick(At(0));
  PeerSilence peer(At(0), lag.total());
  lag.Tick(At(250));
  lag.Tick(At(500));
  // This process was stopped for 8 s: its next tick comes late, and the peer's messages of
  // that time may still wait in the socket.
  lag.Tick(At(8750));
  CHECK(lag.total() == Ms(8000));
  CHECK(peer.Silent(At(8750), lag.total()) == Ms(750));
  CHECK_FALSE(peer.Lost(At(8750), lag.total(), rule));
  // Then the peer really is silent: the bound runs in this process's own time.
  for (int ms = 9000; ms <= 10000; ms += 250) lag.Tick(At(ms));
  CHECK(peer.Silent(At(10000), lag.total()) == Ms(2000));
  CHECK(peer.Lost(At(10000), lag.total(), rule));
  // Heard at last: the gap that counts towards the bound is the 2 s of its own time.
  peer.Heard(At(10000), lag.total());
  CHECK(peer.longest_gap() == Ms(2000));
  CHECK(peer.Bound(rule) == Ms(4000));
}

TEST_CASE("liveness: a long gap is forgotten after two windows of short ones", "[liveness]") {
  const SilenceRule rule = Rule(1000, 10000);
  PeerSilence peer(At(0), {});
  int t = 2000;
  peer.Heard(At(t), {});  // a gap of 2 s
  CHECK(peer.Bound(rule) == Ms(8000));
  for (int i = 0; i < 2 * PeerSilence::kGapWindow; ++i) {
    t += 100;
    peer.Heard(At(t), {});
  }
  CHECK(peer.longest_gap() == Ms(100));
  CHECK(peer.Bound(rule) == Ms(1000));
}

TEST_CASE("liveness: the reason names the silence, the bound and --node-timeout", "[liveness]") {
  CHECK(SilenceText(Ms(15230), Ms(15000), SilenceRule::ForNodeTimeout(Ms(30000))) ==
        "nothing heard for 15.2 s over a connection that stayed open (the bound: 15.0 s, "
        "between half of and the whole --node-timeout 30 s)");
  CHECK(SilenceText(Ms(30010), Ms(30000), SilenceRule::ForMasterNode(Ms(30000))) ==
        "nothing heard for 30.0 s over a connection that stayed open (the bound: --node-timeout "
        "30 s)");
}

}  // namespace gculaunch::job
