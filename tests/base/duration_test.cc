#include "base/duration.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

namespace gculaunch {
namespace {

using std::chrono::milliseconds;

TEST_CASE("duration: seconds to milliseconds, rounded", "[duration]") {
  CHECK(SecondsToMillis(0) == milliseconds(0));
  CHECK(SecondsToMillis(25) == milliseconds(25000));
  CHECK(SecondsToMillis(0.0014) == milliseconds(1));
  CHECK(SecondsToMillis(0.0016) == milliseconds(2));
  CHECK(SecondsToMillis(1e6) == milliseconds(1'000'000'000LL));
  CHECK(SecondsToMillis(1e7) == milliseconds(10'000'000'000LL));
}

TEST_CASE("duration: the conversion saturates instead of wrapping", "[duration]") {
  const milliseconds limit(10'000'000'000LL);
  CHECK(SecondsToMillis(1e8) == limit);
  CHECK(SecondsToMillis(1e10) == limit);  // once wrapped to a negative timeout: SIGKILL at once
  CHECK(SecondsToMillis(1e300) == limit);
  CHECK(SecondsToMillis(std::numeric_limits<double>::infinity()) == limit);
  CHECK(SecondsToMillis(-1) == milliseconds(0));
  CHECK(SecondsToMillis(-std::numeric_limits<double>::infinity()) == milliseconds(0));
  CHECK(SecondsToMillis(std::nan("")) == milliseconds(0));
  // The limit in the finest unit Asio's steady_timer uses still fits, twice over.
  CHECK(std::chrono::duration_cast<std::chrono::nanoseconds>(limit * 2).count() > 0);
}

}  // namespace
}  // namespace gculaunch
