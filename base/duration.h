// Durations given in seconds (flags, job files, --rdzv-conf): the one limit they are held to
// and the one conversion to std::chrono that cannot overflow.
//
// Every seconds-valued setting is checked against kMaxSeconds where it is parsed (cli.cc),
// with a message naming the flag; SecondsToMillis saturates anyway, so that no future flag,
// and no sum of two checked values, can wrap a std::chrono::milliseconds into a negative or
// tiny timeout (a --grace-period 1e10 once SIGKILLed the ranks at once).
//
// Thread safety: pure functions.
#pragma once

#include <chrono>

namespace gculaunch {

/// The largest duration a setting may hold: 10,000,000 s (about 115 days).  Long enough to
/// mean "never" for any timeout of a training job; small enough that its nanoseconds (1e16),
/// even added to the steady clock or to a second such value, fit the int64 of every
/// std::chrono type and every Asio timer, and that its milliseconds fit an int.
inline constexpr double kMaxSeconds = 1e7;

/// `seconds` as milliseconds, rounded to the nearest, clamped to [0, kMaxSeconds]: NaN and
/// negative values give 0, +inf and anything above the limit give the limit.
std::chrono::milliseconds SecondsToMillis(double seconds);

}  // namespace gculaunch
