#include "launcher/sys/status_proc.h"

#include <unistd.h>

#include <charconv>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

#include "launcher/sys/safe_files.h"

namespace gculaunch::sys {

namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return "";
  std::stringstream text;
  text << f.rdbuf();
  return text.str();
}

}  // namespace

bool ParseProcStat(const std::string& stat, long ticks_per_s, long page_bytes, ProcSample* out,
                   std::uint64_t* start_ticks) {
  // The command name may hold spaces and parentheses: the fields start after the last ')'.
  const auto close = stat.rfind(')');
  if (close == std::string::npos || ticks_per_s <= 0) return false;
  std::istringstream rest(stat.substr(close + 1));
  std::vector<std::string> f;  // f[0] is field 3 (state)
  for (std::string word; rest >> word;) f.push_back(word);
  if (f.size() < 22) return false;
  try {
    out->state = f[0].empty() ? '?' : f[0][0];
    const double utime = std::stod(f[11]);  // field 14
    const double stime = std::stod(f[12]);  // field 15
    out->cpu_s = (utime + stime) / static_cast<double>(ticks_per_s);
    *start_ticks = std::stoull(f[19]);                                             // field 22
    out->rss_bytes = std::stoull(f[21]) * static_cast<std::uint64_t>(page_bytes);  // field 24
  } catch (const std::exception&) {  // std::stod/stoull: not a number
    return false;
  }
  return true;
}

ProcSample SampleProcess(pid_t pid, const std::string& proc) {
  ProcSample s;
  if (pid <= 0) return s;
  const std::string stat = ReadAll(proc + "/" + std::to_string(pid) + "/stat");
  const long ticks = ::sysconf(_SC_CLK_TCK);
  std::uint64_t start = 0;
  if (stat.empty() || !ParseProcStat(stat, ticks, ::sysconf(_SC_PAGESIZE), &s, &start)) return s;
  s.alive = s.state != 'Z' && s.state != 'X';
  std::istringstream uptime(ReadAll(proc + "/uptime"));
  double since_boot = 0;
  if (uptime >> since_boot) {
    s.uptime_s =
        std::max(0.0, since_boot - static_cast<double>(start) / static_cast<double>(ticks));
  }
  return s;
}

std::optional<std::uint64_t> ParsePssBytes(const std::string& smaps_rollup) {
  size_t at = 0;
  while (at < smaps_rollup.size()) {
    size_t end = smaps_rollup.find('\n', at);
    if (end == std::string::npos) end = smaps_rollup.size();
    const std::string line = smaps_rollup.substr(at, end - at);
    at = end + 1;
    if (line.rfind("Pss:", 0) != 0) continue;
    std::uint64_t kb = 0;
    bool digits = false;
    for (char c : line.substr(4)) {
      if (c >= '0' && c <= '9') {
        kb = kb * 10 + static_cast<std::uint64_t>(c - '0');
        digits = true;
      } else if (digits) {
        break;
      }
    }
    if (digits) return kb * 1024;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> ReadPssBytes(pid_t pid, const std::string& proc) {
  std::ifstream in(proc + "/" + std::to_string(pid) + "/smaps_rollup");
  if (!in) return std::nullopt;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return ParsePssBytes(text);
}

std::string StatusField(const std::string& status, const std::string& name) {
  const std::string key = name + ":";
  size_t at = 0;
  while (at < status.size()) {
    size_t end = status.find('\n', at);
    if (end == std::string::npos) end = status.size();
    if (status.compare(at, key.size(), key) == 0) {
      size_t begin = at + key.size();
      while (begin < end && (status[begin] == ' ' || status[begin] == '\t')) ++begin;
      return status.substr(begin, end - begin);
    }
    at = end + 1;
  }
  return "";
}

Result<TaskStatus> ParseTaskStatus(const std::string& status) {
  TaskStatus out;
  const std::string state = StatusField(status, "State");
  if (state.empty()) return Error{"no State line in the process's status", ""};
  out.state = state[0];
  const std::string tracer = StatusField(status, "TracerPid");
  long value = -1;
  const char* end = tracer.data() + tracer.size();
  const auto [ptr, ec] = std::from_chars(tracer.data(), end, value);
  if (tracer.empty() || ec != std::errc() || ptr != end || value < 0) {
    return Error{"no TracerPid number in the process's status", ""};
  }
  out.tracer = static_cast<pid_t>(value);
  return out;
}

Result<TaskStatus> ReadTaskStatus(pid_t pid, const std::string& proc) {
  if (pid <= 0) return Error{"no process " + std::to_string(pid), ""};
  // A status file is about 1.5 KiB; 64 KiB is far beyond any kernel's.
  auto text = ReadBoundedFile(proc + "/" + std::to_string(pid) + "/status", 64 * 1024);
  if (!text.ok()) return text.error();
  return ParseTaskStatus(*text);
}

}  // namespace gculaunch::sys
