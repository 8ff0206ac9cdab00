// Small text helpers: the one copy of each, for every layer (flags, job files, device
// profiles, messages, summaries).  Pure functions; thread safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gculaunch {

/// Whether `name` can be an environment variable name: letters, digits and
/// '_', not starting with a digit (what POSIX shells accept).
bool IsEnvName(const std::string& name);

/// Levenshtein distance between `a` and `b`, for "did you mean" hints.
std::size_t EditDistance(const std::string& a, const std::string& b);

/// `items` with `sep` between them: Join({"a", "b"}, ", ") == "a, b".
std::string Join(const std::vector<std::string>& items, std::string_view sep);

/// `numbers` in decimal with `sep` between them: JoinInts({0, 3}, ",") == "0,3" (rank lists).
std::string JoinInts(const std::vector<int>& numbers, std::string_view sep);

/// "A", "A and B", "A, B and C" (for messages that list names).
std::string JoinAnd(const std::vector<std::string>& items);

/// Every part between `sep`s, empty ones included: Split("a,,b,", ',') == {"a", "", "b", ""};
/// Split("", ',') == {}.
std::vector<std::string> Split(std::string_view text, char sep);

/// `text` without leading and trailing white space (std::isspace).
std::string Trim(std::string_view text);

/// `text` in ASCII lower case.
std::string Lower(std::string_view text);

/// "1 node", "2 nodes": `count` and `noun`, with an "s" unless count is 1.
std::string Plural(long long count, std::string_view noun);

/// A duration as seconds for messages: "2.5 s" with `decimals` digits after the point (1 by
/// default: "3.0 s"), or the shortest form ("25 s", "0.25 s") when `decimals` is negative.
std::string Seconds(std::chrono::duration<double> duration, int decimals = 1);

/// A whole decimal number, optionally signed, with nothing before or after it (no white
/// space); nullopt when `text` is not one or does not fit.
std::optional<long long> ParseInteger(std::string_view text);

}  // namespace gculaunch
