#include "launcher/cluster/liveness.h"

#include <algorithm>
#include <cstdint>

#include "base/text.h"

namespace gculaunch::job {

using Duration = LiveClock::duration;
using TimePoint = LiveClock::time_point;

SilenceRule SilenceRule::ForNodeTimeout(std::chrono::milliseconds timeout) {
  SilenceRule rule;
  rule.ceiling = timeout;
  rule.floor = timeout / 2;
  return rule;
}

std::chrono::milliseconds HeartbeatInterval(int nodes, std::chrono::milliseconds node_timeout) {
  const std::chrono::milliseconds second(1000);
  const auto load = std::chrono::milliseconds(
      static_cast<std::int64_t>(1000.0 * std::max(nodes, 1) / kBeatsPerSecond));
  return std::min(std::max(second, load), std::max(second, node_timeout / 8));
}

SilenceRule SilenceRule::ForMasterNode(std::chrono::milliseconds timeout) {
  SilenceRule rule = ForNodeTimeout(timeout);
  rule.floor = rule.ceiling;
  return rule;
}

void OwnLag::Resume(TimePoint now) {
  last_ = now;
  running_ = true;
}

Duration OwnLag::Tick(TimePoint now) {
  Duration late{};
  if (running_) late = std::max(Duration{}, now - last_ - period_);
  total_ += late;
  last_ = now;
  running_ = true;
  return late;
}

PeerSilence::PeerSilence(TimePoint now, Duration lag)
    : since_(now), lag_at_since_(lag), expecting_(true) {}

void PeerSilence::Heard(TimePoint now, Duration lag) {
  if (expecting_) Record(Silent(now, lag));
  since_ = now;
  lag_at_since_ = lag;
}

void PeerSilence::Expect(TimePoint now, Duration lag) {
  if (expecting_) return;
  expecting_ = true;
  since_ = now;
  lag_at_since_ = lag;
}

Duration PeerSilence::Silent(TimePoint now, Duration lag) const {
  if (!expecting_) return Duration{};
  // The lateness of this process since the peer was last heard is not the peer's silence.
  return std::max(Duration{}, (now - since_) - (lag - lag_at_since_));
}

void PeerSilence::Record(Duration gap) {
  window_max_ = std::max(window_max_, gap);
  if (++in_window_ < kGapWindow) return;
  previous_max_ = window_max_;
  window_max_ = Duration{};
  in_window_ = 0;
}

Duration PeerSilence::Bound(const SilenceRule& rule) const {
  const Duration ceiling = rule.ceiling;
  const Duration floor = std::min<Duration>(rule.floor, ceiling);
  return std::clamp<Duration>(longest_gap() * rule.multiple, floor, ceiling);
}

bool PeerSilence::Lost(TimePoint now, Duration lag, const SilenceRule& rule) const {
  return expecting_ && Silent(now, lag) >= Bound(rule);
}

std::string SilenceText(Duration silent, Duration bound, const SilenceRule& rule) {
  const std::string timeout = "--node-timeout " + Seconds(rule.ceiling, -1);
  const std::string what = rule.floor >= rule.ceiling
                               ? timeout
                               : Seconds(bound) + ", between half of and the whole " + timeout;
  return "nothing heard for " + Seconds(silent) +
         " over a connection that stayed open (the bound: " + what + ")";
}

}  // namespace gculaunch::job
