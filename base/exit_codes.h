// The exit codes of gculaunch: one table, documented in README.md.
//
//   0        every rank of the job exited 0
//   1..125   the first failing rank's own exit code, passed through
//   128+S    the first failing rank was killed by signal S, or gculaunch itself
//            was stopped by signal S (SIGINT -> 130, SIGTERM -> 143)
//   2        usage or configuration error (bad flag, environment, YAML, device)
//   3        rendezvous failed: the master was unreachable until the deadline
//   4        a node of the job was lost (stopped heartbeating)
//   5        ranks could not be killed (stuck in uninterruptible sleep): node unhealthy
//   6        the job hung (--hang-timeout) and was stopped (--on-hang stop, or restart
//            with no restart left)
//   7        a rank could not be started for lack of resources (open files, processes,
//            memory): not the program's fault
//   70       internal error in gculaunch (a bug: please report it)
//   126      a rank's program was found but cannot be run (not executable, unreadable
//            script), as the shell says
//   127      a rank's program (or the Python interpreter) was not found, as the shell says
//
// A rank that exits 2..6, 70, 126 or 127 itself is indistinguishable by code alone;
// --summary-json (and TORCHELASTIC_ERROR_FILE) always record which it was.
#pragma once

namespace gculaunch::exit_code {

inline constexpr int kSuccess = 0;
inline constexpr int kUsage = 2;
inline constexpr int kRendezvousFailed = 3;
inline constexpr int kNodeLost = 4;
inline constexpr int kStuckProcesses = 5;
inline constexpr int kHang = 6;
inline constexpr int kNoResources = 7;
inline constexpr int kInternal = 70;
inline constexpr int kNotExecutable = 126;
inline constexpr int kSpawnFailed = 127;
inline constexpr int kSignalBase = 128;

}  // namespace gculaunch::exit_code
