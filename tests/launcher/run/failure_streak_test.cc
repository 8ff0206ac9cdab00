#include "launcher/run/failure_streak.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace gculaunch {
namespace {

const std::string kKeyError = "exit code 1: KeyError: 'lr'";
const std::string kImport = "exit code 1: ModuleNotFoundError: No module named 'yaml'";

AttemptEnd Failed(double ran_s, std::string signature,
                  std::optional<std::int64_t> progress = std::nullopt) {
  return AttemptEnd{true, ran_s, AttemptReport{std::move(signature), progress}};
}

AttemptEnd NotARankFailure() { return AttemptEnd{false, 0.1, AttemptReport{kKeyError, 5}}; }

// One row: the failed attempts in order, from a fresh streak, and after which one (1-based)
// the loop stops; 0: it never does.
struct Row {
  std::string name;
  StreakConfig config;
  std::vector<AttemptEnd> attempts;
  int stops_after;
  std::string line;  ///< the stop's line ("" when it never stops)
};

TEST_CASE("failure streak: table of failed attempts and where the loop stops", "[failure_streak]") {
  const StreakConfig same3{3, "", 10};
  const StreakConfig progress3{3, "ckpt/step", 10};
  const std::string same4 =
      "the same failure 4 times in a row: " + kKeyError + "; not restarting (--max-same-failures)";
  const std::vector<Row> rows = {
      {"the same quick failure: the 4th attempt stops (N = 3)",
       same3,
       {Failed(0.5, kKeyError), Failed(0.5, kKeyError), Failed(0.5, kKeyError),
        Failed(0.5, kKeyError), Failed(0.5, kKeyError)},
       4,
       same4},
      {"N = 1: the second identical failure stops",
       StreakConfig{1, "", 10},
       {Failed(0.1, kKeyError), Failed(0.1, kKeyError)},
       2,
       "the same failure 2 times in a row: " + kKeyError +
           "; not restarting (--max-same-failures)"},
      {"0 is off", StreakConfig{0, "", 10}, std::vector<AttemptEnd>(8, Failed(0.1, kKeyError)), 0,
       ""},
      {"a different failure in between starts over",
       same3,
       {Failed(0.1, kKeyError), Failed(0.1, kKeyError), Failed(0.1, kImport),
        Failed(0.1, kKeyError), Failed(0.1, kKeyError), Failed(0.1, kKeyError)},
       0,
       ""},
      {"failing differently every time keeps the restarts",
       same3,
       {Failed(0.1, "exit code 1: a"), Failed(0.1, "exit code 1: b"), Failed(0.1, "exit code 1: c"),
        Failed(0.1, "exit code 1: d"), Failed(0.1, "exit code 1: e")},
       0,
       ""},
      {"a slow attempt (10 s or more) starts over; 9.99 s is quick",
       same3,
       {Failed(9.99, kKeyError), Failed(9.99, kKeyError), Failed(10, kKeyError),
        Failed(9.99, kKeyError), Failed(9.99, kKeyError), Failed(9.99, kKeyError),
        Failed(9.99, kKeyError)},
       7,
       same4},
      {"an attempt without a signature starts over",
       same3,
       {Failed(0.1, kKeyError), Failed(0.1, kKeyError), Failed(0.1, ""), Failed(0.1, kKeyError),
        Failed(0.1, kKeyError), Failed(0.1, kKeyError)},
       0,
       ""},
      {"a lost node or a hang restart starts over",
       same3,
       {Failed(0.1, kKeyError), Failed(0.1, kKeyError), Failed(0.1, kKeyError), NotARankFailure(),
        Failed(0.1, kKeyError), Failed(0.1, kKeyError), Failed(0.1, kKeyError)},
       0,
       ""},
      {"progress: a number that stops rising stops the loop, however slow the attempts",
       progress3,
       {Failed(600, "exit code 1: a", 10), Failed(600, "exit code 1: b", 20),
        Failed(600, "exit code 1: c", 20), Failed(600, "exit code 1: d", 20),
        Failed(600, "exit code 1: e", 20)},
       5,
       "the progress file ckpt/step did not advance in 4 failed attempts in a row (no number "
       "above 20); not restarting (--max-same-failures, --progress-file)"},
      {"progress: a lower number is no progress, a higher one is",
       progress3,
       {Failed(600, "a", 50), Failed(600, "b", 3), Failed(600, "c", 50), Failed(600, "d", 51),
        Failed(600, "e", 51), Failed(600, "f", 51)},
       0,
       ""},
      {"progress: no file at all, ever, is no progress",
       progress3,
       {Failed(600, "a"), Failed(600, "b"), Failed(600, "c"), Failed(600, "d")},
       4,
       "the progress file ckpt/step did not advance in 4 failed attempts in a row (no number in "
       "it); not restarting (--max-same-failures, --progress-file)"},
      {"progress: a file that appears is progress",
       progress3,
       {Failed(600, "a"), Failed(600, "b"), Failed(600, "c", 0), Failed(600, "d", 0),
        Failed(600, "e", 0)},
       0,
       ""},
      {"progress: the same failure still stops first when it is quick",
       progress3,
       {Failed(0.1, kKeyError, 1), Failed(0.1, kKeyError, 2), Failed(0.1, kKeyError, 3),
        Failed(0.1, kKeyError, 4)},
       4,
       same4},
  };
  for (const Row& row : rows) {
    INFO(row.name);
    StreakState state;
    int stopped = 0;
    std::string line;
    for (size_t i = 0; i < row.attempts.size() && stopped == 0; ++i) {
      const StreakStep step = NextStreak(state, row.config, row.attempts[i]);
      state = step.state;
      if (step.stop) {
        stopped = static_cast<int>(i) + 1;
        line = step.stop->Line();
      }
    }
    CHECK(stopped == row.stops_after);
    CHECK(line == row.line);
  }
}

}  // namespace
}  // namespace gculaunch
