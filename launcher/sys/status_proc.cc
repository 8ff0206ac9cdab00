#include "launcher/sys/status_proc.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

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

}  // namespace gculaunch::sys
