#include "launcher/run/failure_streak.h"

namespace gculaunch {

std::string StreakStop::Line() const {
  if (kind == Kind::kSameFailure) {
    return "the same failure " + std::to_string(attempts) + " times in a row: " + signature +
           "; not restarting (--max-same-failures)";
  }
  const std::string at =
      progress ? "no number above " + std::to_string(*progress) : "no number in it";
  return "the progress file " + progress_file + " did not advance in " + std::to_string(attempts) +
         " failed attempts in a row (" + at +
         "); not restarting (--max-same-failures, --progress-file)";
}

namespace {

// The same-failure rule: only quick attempts with a signature count.
void CountSame(StreakState& s, const StreakConfig& config, const AttemptEnd& a) {
  const std::string& sig = a.report.signature;
  if (a.ran_s >= config.quick_s || sig.empty()) {
    s.signature.clear();
    s.same = 0;
    return;
  }
  s.same = sig == s.signature ? s.same + 1 : 0;
  s.signature = sig;
}

// The progress rule: a number above the highest seen is progress; anything else is not
// (no file, no number, the same or a lower one).
void CountStalled(StreakState& s, const AttemptEnd& a) {
  const std::optional<std::int64_t>& now = a.report.progress;
  if (!s.progress_seen) {
    s.progress_seen = true;
    s.highest = now;
    s.stalled = 0;
    return;
  }
  if (now && (!s.highest || *now > *s.highest)) {
    s.highest = now;
    s.stalled = 0;
    return;
  }
  ++s.stalled;
}

}  // namespace

StreakStep NextStreak(const StreakState& state, const StreakConfig& config,
                      const AttemptEnd& attempt) {
  StreakStep step{state, std::nullopt};
  StreakState& s = step.state;
  if (!attempt.rank_failed || config.max_same <= 0) {
    s = StreakState{};
    return step;
  }
  CountSame(s, config, attempt);
  if (!config.progress_file.empty()) CountStalled(s, attempt);
  if (s.same >= config.max_same) {
    step.stop = StreakStop{StreakStop::Kind::kSameFailure, s.same + 1, s.signature, {}, {}};
  } else if (!config.progress_file.empty() && s.stalled >= config.max_same) {
    step.stop = StreakStop{
        StreakStop::Kind::kNoProgress, s.stalled + 1, {}, s.highest, config.progress_file};
  }
  return step;
}

}  // namespace gculaunch
