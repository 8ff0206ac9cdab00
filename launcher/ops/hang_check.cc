#include "launcher/ops/hang_check.h"

#include <algorithm>
#include <cstdio>

namespace gculaunch {
namespace {

std::string Seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", s);
  return text;
}

std::string Ranks(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i == 0 ? "" : ", ") + std::to_string(ranks[i]);
  return out;
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
      verdict.why = "no rank has shown any progress in the " + Seconds(since_start) +
                    " since the attempt started (--hang-grace " + Seconds(grace_s) + ")";
    }
    return verdict;
  }
  if (*job_age > timeout_s) {
    verdict.hang = true;
    verdict.silent_s = *job_age;
    verdict.why = "no progress from any rank for " + Seconds(*job_age) + " (--hang-timeout " +
                  Seconds(timeout_s) + ")";
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
    verdict.why = Ranks(verdict.silent_ranks) + " stopped touching GCULAUNCH_HEARTBEAT_FILE " +
                  "(more than " + Seconds(timeout_s) + " ago) while other ranks still do";
  }
  return verdict;
}

}  // namespace gculaunch
