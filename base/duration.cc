#include "base/duration.h"

#include <algorithm>
#include <cmath>

namespace gculaunch {

std::chrono::milliseconds SecondsToMillis(double seconds) {
  if (std::isnan(seconds) || seconds <= 0) return std::chrono::milliseconds(0);
  const double clamped = std::min(seconds, kMaxSeconds);
  // At most 1e12 ms: exact in a double and far below LLONG_MAX.
  return std::chrono::milliseconds(std::llround(clamped * 1000.0));
}

}  // namespace gculaunch
