// Thread priorities of the processes gculaunch starts: a nice value and a scheduling policy
// (SCHED_OTHER, SCHED_BATCH or SCHED_IDLE), set on every thread of a process and read back.
//
// Why per thread: on Linux setpriority(PRIO_PROCESS, pid) and sched_setscheduler(pid) change
// only the thread whose id is `pid`; the threads a process already started keep theirs.  A
// warm-rank standby (launcher/run/standby_pool.h) waits at a lower priority, and the threads
// its preload started must all be raised again before it becomes a rank.
//
// Lowering a priority is always allowed; raising it again needs CAP_SYS_NICE or an
// RLIMIT_NICE that allows the nice value (and leaving SCHED_IDLE counts as raising):
// MayRaiseTo answers before anything is lowered, so that gculaunch never lowers what it cannot
// raise again.
//
// The Parse/May functions are pure; the others make system calls.  SetEveryThread walks
// /proc/<pid>/task: call it where a slow /proc cannot delay the event loop (StandbyPool's
// OffLoop thread).
// Thread safety: any thread.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>
#include <string>

#include "base/error.h"

namespace gculaunch::sys {

/// A thread's scheduling: its nice value and its policy (SCHED_OTHER, SCHED_BATCH, SCHED_IDLE).
struct Priority {
  int nice = 0;
  int policy = 0;  ///< SCHED_OTHER is 0
  bool operator==(const Priority&) const = default;
};

/// "nice 10, SCHED_IDLE".
std::string Describe(const Priority& priority);

/// The effective capabilities (the "CapEff:" line, hexadecimal) of a /proc/<pid>/status text.
Result<std::uint64_t> ParseCapEff(const std::string& status);

/// Whether a process with effective capabilities `cap_eff` and the soft RLIMIT_NICE
/// `nice_limit` may raise a thread of its own user to nice value `nice` (CAP_SYS_NICE, or
/// an RLIMIT_NICE of at least 20 - nice; RLIM_INFINITY allows everything).
bool MayRaiseTo(std::uint64_t cap_eff, rlim_t nice_limit, int nice);

/// MayRaiseTo for this process: its CapEff (/proc/self/status) and its RLIMIT_NICE.
Result<bool> MayRaiseOwnTo(int nice);

/// The calling thread's priority (its nice value and policy).
Result<Priority> OwnPriority();

/// Whether gculaunch can move threads between `policy` and SCHED_IDLE: SCHED_OTHER, SCHED_BATCH
/// and SCHED_IDLE can (no real-time parameters to keep).
bool IsTimeSharing(int policy);

/// Sets every thread of process `pid` to `priority` (policy first, then the nice value) and
/// reads both back.  A thread that exits meanwhile is skipped.  An error names the first thread
/// that could not be set or that kept another value, and the reason.
Status SetEveryThread(pid_t pid, const Priority& priority, const std::string& proc = "/proc");

}  // namespace gculaunch::sys
