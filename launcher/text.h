// Small text helpers shared by the front end's parsers (flags, job files,
// device profiles).  Pure functions; thread safe.
#pragma once

#include <cstddef>
#include <string>

namespace gculaunch {

/// Whether `name` can be an environment variable name: letters, digits and
/// '_', not starting with a digit (what POSIX shells accept).
bool IsEnvName(const std::string& name);

/// Levenshtein distance between `a` and `b`, for "did you mean" hints.
std::size_t EditDistance(const std::string& a, const std::string& b);

}  // namespace gculaunch
