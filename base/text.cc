#include "base/text.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>

namespace gculaunch {

bool IsEnvName(const std::string& name) {
  // POSIX's portable names: a shell cannot export a name with a leading digit or other bytes.
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(),
                     [](unsigned char c) { return std::isalnum(c) != 0 || c == '_'; });
}

std::size_t EditDistance(const std::string& a, const std::string& b) {
  // One row of the dynamic-programming table at a time.
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string Join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    out += items[i];
  }
  return out;
}

std::string JoinInts(const std::vector<int>& numbers, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < numbers.size(); ++i) {
    if (i > 0) out += sep;
    out += std::to_string(numbers[i]);
  }
  return out;
}

std::string JoinAnd(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += i + 1 == items.size() ? " and " : ", ";
    out += items[i];
  }
  return out;
}

std::vector<std::string> Split(std::string_view text, char sep) {
  std::vector<std::string> parts;
  // An empty text has no parts, not one empty part: "" as a list means "none".
  if (text.empty()) return parts;
  std::size_t begin = 0;
  for (;;) {
    const std::size_t at = text.find(sep, begin);
    parts.emplace_back(text.substr(begin, at - begin));
    if (at == std::string_view::npos) return parts;
    begin = at + 1;
  }
}

std::string Trim(std::string_view text) {
  auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  return std::string(text);
}

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string Plural(long long count, std::string_view noun) {
  return std::to_string(count) + " " + std::string(noun) + (count == 1 ? "" : "s");
}

std::string Seconds(std::chrono::duration<double> duration, int decimals) {
  char buf[48];        // snprintf, not a stream: no locale may put a comma into a message's number
  if (decimals < 0) {  // %g: "2 s", "0.5 s", as the user wrote it
    std::snprintf(buf, sizeof buf, "%g s", duration.count());
  } else {
    std::snprintf(buf, sizeof buf, "%.*f s", decimals, duration.count());
  }
  return buf;
}

std::optional<long long> ParseInteger(std::string_view text) {
  long long value = 0;
  const char* end = text.data() + text.size();
  // from_chars, not strtoll: no locale, no leading spaces or '+', and the whole text must be
  // the number, so "10s" is an error rather than 10.
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

}  // namespace gculaunch
