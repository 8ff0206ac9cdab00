#include "launcher/ops/hang_check.h"

#include <catch2/catch.hpp>

namespace gculaunch {
namespace {

RankProgress Rank(int rank, std::optional<double> output, std::optional<double> beat,
                  double since_start = 100, bool running = true) {
  RankProgress p;
  p.local_rank = rank;
  p.rank = rank;
  p.running = running;
  p.output_age_s = output;
  p.heartbeat_age_s = beat;
  p.since_start_s = since_start;
  return p;
}

}  // namespace

TEST_CASE("hang check: table", "[hang_check]") {
  const std::nullopt_t none = std::nullopt;
  struct Case {
    const char* name;
    std::vector<RankProgress> ranks;
    bool hang;
    std::vector<int> silent;
    std::string why;
  };
  const std::vector<Case> cases = {
      {"every rank quiet for longer than the timeout",
       {Rank(0, 3.5, none), Rank(1, 4.0, none)},
       true,
       {},
       "no progress from any rank for 3.5 s (--hang-timeout 3.0 s)"},
      {"rank 0 alone prints: progress for the job",
       {Rank(0, 0.2, none), Rank(1, none, none), Rank(2, 50.0, none)},
       false,
       {},
       ""},
      {"a heartbeat alone is progress", {Rank(0, none, 0.5), Rank(1, 40.0, none)}, false, {}, ""},
      {"a rank whose heartbeat stopped while another's beats is flagged alone",
       {Rank(0, none, 0.1), Rank(1, none, 7.0), Rank(2, 0.1, none)},
       true,
       {1},
       "rank 1 stopped touching GCULAUNCH_HEARTBEAT_FILE (more than 3.0 s ago) while other "
       "ranks still do"},
      {"a stopped heartbeat of a rank that exited does not count",
       {Rank(0, none, 0.1), Rank(1, none, 7.0, 100, false)},
       false,
       {},
       ""},
      {"start-up: within the grace",
       {Rank(0, none, none, 50), Rank(1, none, none, 50)},
       false,
       {},
       ""},
      {"start-up: no progress at all beyond the grace",
       {Rank(0, none, none, 61), Rank(1, none, none, 61)},
       true,
       {},
       "no rank has shown any progress in the 61.0 s since the attempt started (--hang-grace "
       "60.0 s)"},
      {"no rank running: never a hang", {Rank(0, 99.0, none, 100, false)}, false, {}, ""},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const HangVerdict v = CheckHang(c.ranks, 3.0, 60.0);
    CHECK(v.hang == c.hang);
    CHECK(v.silent_ranks == c.silent);
    CHECK(v.why == c.why);
  }
}

TEST_CASE("hang check: the silence a verdict states", "[hang_check]") {
  const std::nullopt_t none = std::nullopt;
  CHECK(CheckHang({Rank(0, 3.5, none), Rank(1, 4.0, 5.0)}, 3.0, 60.0).silent_s == 3.5);
  CHECK(
      CheckHang({Rank(0, none, 0.1), Rank(1, none, 7.0), Rank(2, none, 9.0)}, 3.0, 60.0).silent_s ==
      9.0);
  CHECK(CheckHang({Rank(0, none, none, 61)}, 3.0, 60.0).silent_s == 61.0);
  CHECK(CheckHang({Rank(0, 1.0, none)}, 3.0, 60.0).silent_s == 0.0);
}

}  // namespace gculaunch
