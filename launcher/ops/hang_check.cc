#include "launcher/ops/hang_check.h"

#include <algorithm>
#include <chrono>

#include "base/text.h"

namespace gculaunch {
namespace {

// "12.5 s": one decimal, as the verdicts have always printed them.
std::string SecondsText(double s) { return Seconds(std::chrono::duration<double>(s)); }

std::string RanksText(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + JoinInts(ranks, ", ");
}

}  // namespace

const char* OnHangName(OnHang on_hang) {
  switch (on_hang) {
    case OnHang::kStop:
      return "stop";
    case OnHang::kRestart:
      return "restart";
    case OnHang::kReport:
      return "report";
  }
  return "?";
}

HangVerdict CheckHang(const std::vector<RankProgress>& ranks, double timeout_s, double grace_s) {
  HangVerdict verdict;
  if (std::none_of(ranks.begin(), ranks.end(), [](const RankProgress& r) { return r.running; })) {
    return verdict;
  }
  std::optional<double> job_age;
  double since_start = 0;
  for (const RankProgress& r : ranks) {
    for (const auto& age : {r.output_age_s, r.heartbeat_age_s}) {
      if (age && (!job_age || *age < *job_age)) job_age = age;
    }
    since_start = std::max(since_start, r.since_start_s);
  }
  if (!job_age) {
    if (since_start > grace_s) {
      verdict.hang = true;
      verdict.silent_s = since_start;
      verdict.why = "no rank has shown any progress in the " + SecondsText(since_start) +
                    " since the attempt started (--hang-grace " + SecondsText(grace_s) + ")";
    }
    return verdict;
  }
  if (*job_age > timeout_s) {
    verdict.hang = true;
    verdict.silent_s = *job_age;
    verdict.why = "no progress from any rank for " + SecondsText(*job_age) + " (--hang-timeout " +
                  SecondsText(timeout_s) + ")";
    return verdict;
  }
  const bool someone_beats = std::any_of(ranks.begin(), ranks.end(), [&](const RankProgress& r) {
    return r.heartbeat_age_s && *r.heartbeat_age_s <= timeout_s;
  });
  if (!someone_beats) return verdict;
  for (const RankProgress& r : ranks) {
    if (r.running && r.heartbeat_age_s && *r.heartbeat_age_s > timeout_s) {
      verdict.silent_ranks.push_back(r.rank);
      verdict.silent_s = std::max(verdict.silent_s, *r.heartbeat_age_s);
    }
  }
  if (!verdict.silent_ranks.empty()) {
    verdict.hang = true;
    verdict.why = RanksText(verdict.silent_ranks) + " stopped touching GCULAUNCH_HEARTBEAT_FILE " +
                  "(more than " + SecondsText(timeout_s) + " ago) while other ranks still do";
  }
  return verdict;
}

}  // namespace gculaunch
