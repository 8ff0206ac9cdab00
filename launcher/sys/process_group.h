// Process groups: signalling them, and asking whether they still have members.
//
// Every rank leads its own process group (pgid == the rank's pid), so one
// kill(-pgid, sig) reaches the rank and everything it started that stayed in
// its group (shell wrappers, DataLoader workers, a grandchild that outlived
// the rank).  These functions are the only users of kill() in gculaunch.
//
// A group must not be signalled any more once it is known to be empty: its
// number may then be reused by an unrelated process group.  Callers track
// that (WorkerGroup marks a group empty and stops signalling it).
//
// Thread safety: stateless functions; /proc reads are racy by nature and the
// results are snapshots.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

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
/// process does not exist.
bool ReadProcInfo(pid_t pid, ProcInfo* info);

/// The processes whose process group is `pgid`, zombies included, from a
/// scan of /proc.
std::vector<ProcInfo> GroupMembers(pid_t pgid);

/// True while group `pgid` has a member that is not a zombie.  Zombies are
/// ignored because an orphaned grandchild's zombie can linger when PID 1 of a
/// container does not reap, and it holds nothing.
bool GroupAlive(pid_t pgid);

/// "D (disk sleep)" for 'D', and so on.
std::string ProcStateName(char state);

}  // namespace gculaunch::sys
