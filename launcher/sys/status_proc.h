// Process samples for `gculaunch status` and /metrics: CPU time, resident memory, state and
// age of one process, read from /proc/<pid>/stat (docs: proc(5)); the memory a process shares
// with others (PSS); and whether a process can run at all (stopped, traced), from
// /proc/<pid>/status.
//
// The Parse* functions are pure (a test feeds them text); the others read the files below
// `proc` ("/proc" unless a test says otherwise).  A read of another process's smaps_rollup
// can wait on that process's memory map lock: call ReadPssBytes where a wait cannot delay
// the event loop (StandbyPool does it on its OffLoop thread).
// Thread safety: any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "base/error.h"

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

/// The value of line "<name>:" of a /proc/<pid>/status text, leading blanks skipped; empty
/// when there is no such line.
std::string StatusField(const std::string& status, const std::string& name);

/// What /proc/<pid>/status says about whether a process can run.
struct TaskStatus {
  char state = '?';  ///< "State:": R, S, D, T (stopped), t (stopped by its tracer), Z, X
  pid_t tracer = 0;  ///< "TracerPid:": the process that ptrace()s it; 0: none
};
/// The State and TracerPid lines of a /proc/<pid>/status text.  An error names the line that
/// is missing or does not parse.
Result<TaskStatus> ParseTaskStatus(const std::string& status);
/// ParseTaskStatus of /proc/<pid>/status (a bounded read).  An error when the process is gone
/// or the file cannot be read.
Result<TaskStatus> ReadTaskStatus(pid_t pid, const std::string& proc = "/proc");

}  // namespace gculaunch::sys
