#include "launcher/run/restart_backoff.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace gculaunch {
namespace {

// One row: the run times of the attempts that ended, in order, from a fresh streak, and the
// wait before each restart that follows them.
struct Row {
  std::string name;
  BackoffConfig config;
  std::vector<double> ran_s;
  std::vector<double> delays;
};

TEST_CASE("restart backoff: table of attempt run times and waits", "[restart_backoff]") {
  const BackoffConfig defaults = DefaultBackoffForTest();
  const std::vector<Row> rows = {
      {"a crash loop: the first restart at once, then 1, 2, 4, ... capped at 60",
       defaults,
       {0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1},
       {0, 1, 2, 4, 8, 16, 32, 60, 60, 60}},
      {"a long run resets the streak: the next failure restarts at once",
       defaults,
       {0.1, 0.1, 0.1, 60, 0.1, 0.1},
       {0, 1, 2, 0, 0, 1}},
      {"an attempt between 10 and 60 s neither grows nor resets the streak",
       defaults,
       {0.1, 0.1, 30, 30, 0.1},
       {0, 1, 1, 1, 2}},
      {"just under 10 s is quick; exactly 10 s is not",
       defaults,
       {9.99, 9.99, 10, 9.99},
       {0, 1, 1, 2}},
      {"an attempt of 59.9 s does not reset, 60 s does",
       defaults,
       {0.1, 0.1, 59.9, 60},
       {0, 1, 1, 0}},
      {"a single failure after a long run never waits", defaults, {3600, 3600, 3600}, {0, 0, 0}},
      {"off: never waits", MakeBackoff(0, 0), {0.1, 0.1, 0.1, 0.1}, {0, 0, 0, 0}},
      {"INITIAL:MAX 0.5:3", MakeBackoff(0.5, 3), {0, 0, 0, 0, 0, 0}, {0, 0.5, 1, 2, 3, 3}},
      {"INITIAL = MAX: a fixed wait after the first restart",
       MakeBackoff(5, 5),
       {0, 0, 0, 0},
       {0, 5, 5, 5}},
  };
  for (const Row& row : rows) {
    INFO(row.name);
    REQUIRE(row.ran_s.size() == row.delays.size());
    BackoffState state;
    for (size_t i = 0; i < row.ran_s.size(); ++i) {
      INFO("restart " << i + 1 << " after an attempt of " << row.ran_s[i] << " s");
      const BackoffStep step = NextBackoff(state, row.config, row.ran_s[i]);
      CHECK(step.delay_s == Approx(row.delays[i]));
      state = step.state;
    }
  }
}

TEST_CASE("restart backoff: a very long crash loop stays at MAX", "[restart_backoff]") {
  BackoffState state;
  BackoffStep step;
  for (int i = 0; i < 100000; ++i) {
    step = NextBackoff(state, MakeBackoff(1, 1e9), 0);
    state = step.state;
  }
  CHECK(step.delay_s == 1e9);  // never inf, never a wrapped count
  CHECK(state.streak <= 64);
}

TEST_CASE("restart backoff: the setting as --restart-backoff spells it", "[restart_backoff]") {
  CHECK(DescribeBackoffForTest(DefaultBackoffForTest()) == "1:60");
  CHECK(DescribeBackoffForTest(MakeBackoff(0.5, 30)) == "0.5:30");
  CHECK(DescribeBackoffForTest(MakeBackoff(0, 0)) == "off");
  CHECK_FALSE(BackoffConfig{}.enabled());
}

}  // namespace
}  // namespace gculaunch
