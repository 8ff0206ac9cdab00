#include "launcher/run/restart_backoff.h"

#include <algorithm>
#include <cstdio>

namespace gculaunch {

BackoffConfig DefaultBackoffForTest() { return MakeBackoff(1, 60); }

BackoffConfig MakeBackoff(double initial_s, double max_s) {
  BackoffConfig config;
  config.initial_s = initial_s;
  config.max_s = max_s;
  return config;
}

BackoffStep NextBackoff(const BackoffState& state, const BackoffConfig& config, double ran_s) {
  BackoffStep step{state, 0};
  if (!config.enabled()) {
    step.state.streak = 0;
    return step;
  }
  if (ran_s >= config.reset_s) {
    step.state.streak = 0;
  } else if (ran_s < config.quick_s) {
    // Bounded: past 64 doublings every delay is max_s anyway.
    step.state.streak = std::min(step.state.streak + 1, 64);
  }
  if (step.state.streak < 2) return step;
  double delay = config.initial_s;
  for (int i = 2; i < step.state.streak && delay < config.max_s; ++i) delay *= 2;
  step.delay_s = std::min(delay, std::max(config.max_s, config.initial_s));
  return step;
}

std::string DescribeBackoffForTest(const BackoffConfig& config) {
  if (!config.enabled()) return "off";
  char text[64];
  std::snprintf(text, sizeof text, "%g:%g", config.initial_s, config.max_s);
  return text;
}

}  // namespace gculaunch
