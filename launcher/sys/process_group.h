// Process groups: signalling them, and asking whether they still have members.
//
// Every rank leads its own process group (pgid == the rank's pid), so one
// kill(-pgid, sig) reaches the rank and everything it started that stayed in
// its group (shell wrappers, DataLoader workers, a grandchild that outlived
// the rank).  These functions are the only users of kill() in gculaunch.
//
// A group's number belongs to gculaunch only while the group has a member or
// its leader (the rank) is an unreaped child: the zombie of an exited leader
// keeps the number from being given to any other process.  So a rank's
// leader is not reaped until its group is known empty (ChildWatcher reads
// exits with WNOWAIT; WorkerGroup releases the zombie), and a group known to
// be empty is never signalled again.
//
// "Cannot look" is never "empty": a /proc scan that fails (no descriptor left,
// /proc missing) says so, and the caller keeps treating the group as alive.
// A few descriptors are held in reserve (ReserveDescriptors) and released for
// the length of a scan that hit EMFILE/ENFILE.
//
// Thread safety: stateless functions; /proc reads are racy by nature and the
// results are snapshots.
#pragma once

#include <sys/types.h>

#include <set>
#include <string>
#include <vector>

#include "base/error.h"

namespace gculaunch::sys {

/// Sends `sig` to every process of group `pgid`.  Returns false when the
/// group has no member left (ESRCH); other errors are also reported as false
/// with `err` set.
bool SignalGroup(pid_t pgid, int sig, int* err = nullptr);

/// Sends `sig` to the single process `pid`.  Returns false on ESRCH.
bool SignalProcess(pid_t pid, int sig);

/// What /proc says about one process.
struct ProcInfo {
  pid_t pid = 0;
  pid_t pgid = 0;
  char state = '?';   ///< R, S, D, Z, T, ...
  std::string comm;   ///< the command name (without parentheses)
  std::string wchan;  ///< kernel function it waits in ("0" or empty when unknown)

  /// "pid 1234 (python3) state D (disk sleep), wchan request_wait_answer"
  std::string Describe() const;
};

/// Reads /proc/<pid>/stat and /proc/<pid>/wchan.  Returns false when the
/// process does not exist (or /proc cannot be read).
bool ReadProcInfo(pid_t pid, ProcInfo* info);

/// The start time of process `pid` (field 22 of /proc/<pid>/stat, clock ticks after boot):
/// with the pid, it names one process for good.  0 when it cannot be read.
unsigned long long ProcessStartTime(pid_t pid);

/// The processes whose process group is `pgid`, zombies included, from a
/// scan of /proc.  When the scan fails, `scan_error` (if given) gets its errno
/// and the list holds what was seen before the failure.
std::vector<ProcInfo> GroupMembers(pid_t pgid, int* scan_error = nullptr);

/// Which of `pgids` have a member that is not a zombie, from one scan of /proc
/// however many groups are asked about.  Zombies are ignored: an exited leader
/// that gculaunch has not reaped yet, or an orphaned grandchild's zombie that
/// PID 1 of a container does not reap, holds nothing.  An error (with the
/// errno) when /proc could not be read: then nothing is known to be empty.
Result<std::set<pid_t>> LiveGroups(const std::set<pid_t>& pgids);

/// True while group `pgid` has a member that is not a zombie, or when /proc cannot tell.
bool GroupAliveForTest(pid_t pgid);

/// Keeps `count` descriptors open (on /dev/null) for LiveGroups to release when
/// the descriptor table is full.  Call once at start; later calls change the count.
void ReserveDescriptors(int count);

/// "D (disk sleep)" for 'D', and so on.
std::string ProcStateName(char state);

}  // namespace gculaunch::sys
