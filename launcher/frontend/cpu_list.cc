#include "launcher/frontend/cpu_list.h"

#include <algorithm>
#include <charconv>

namespace gculaunch {
namespace {

std::optional<int> ParseCpu(std::string_view text) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < 0) return std::nullopt;
  return value;
}

}  // namespace

std::optional<std::vector<int>> ParseCpuList(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  std::vector<int> cpus;
  if (text.empty()) return cpus;
  while (true) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    const size_t dash = item.find('-');
    auto first = ParseCpu(item.substr(0, dash));
    auto last = dash == std::string_view::npos ? first : ParseCpu(item.substr(dash + 1));
    // A bound on the range keeps a corrupt file from allocating gigabytes.
    if (!first || !last || *last < *first || *last - *first > (1 << 20)) return std::nullopt;
    for (int cpu = *first; cpu <= *last; ++cpu) cpus.push_back(cpu);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string FormatCpuList(std::vector<int> cpus) {
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace gculaunch
