// Process samples for `gculaunch status` and /metrics: CPU time, resident memory, state and
// age of one process, read from /proc/<pid>/stat (docs: proc(5)).
//
// ParseProcStat is pure (a test feeds it text); SampleProcess reads the files below `proc`
// ("/proc" unless a test says otherwise).
// Thread safety: any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace gculaunch::sys {

struct ProcSample {
  bool alive = false;  ///< the process exists and is not a zombie
  char state = '?';    ///< R, S, D, Z, T, ...
  double cpu_s = 0;    ///< user + system CPU seconds
  std::uint64_t rss_bytes = 0;
  double uptime_s = 0;  ///< seconds since it started
};

/// Fills state, cpu_s, rss_bytes and the start time (in clock ticks after boot, into
/// *start_ticks) from the text of /proc/<pid>/stat.  False when the text does not parse.
bool ParseProcStat(const std::string& stat, long ticks_per_s, long page_bytes, ProcSample* out,
                   std::uint64_t* start_ticks);

/// The sample of `pid` (alive false when it is gone, or a zombie).
ProcSample SampleProcess(pid_t pid, const std::string& proc = "/proc");

/// The "Pss:" line of a smaps_rollup text, in bytes; nullopt when there is none.
std::optional<std::uint64_t> ParsePssBytes(const std::string& smaps_rollup);
/// The proportional set size of `pid` (/proc/<pid>/smaps_rollup, Linux 4.14+): its memory
/// with pages shared with other processes divided among them.  nullopt: unknown.
std::optional<std::uint64_t> ReadPssBytes(pid_t pid, const std::string& proc = "/proc");

}  // namespace gculaunch::sys
