// ChildSetup: what a freshly forked rank does to itself before exec.
//
// RunChildSetup() runs in the child between fork() and execve() (Spawner
// calls it from Boost.Process v2's on_exec_setup hook).  It puts the child in
// a state that does not depend on how gculaunch itself was started:
//
//   1. setpgid(0, 0): the rank leads its own process group, so gculaunch can
//      signal it and everything it starts with one kill(-pgid);
//   2. optionally takes the controlling terminal for its group (rank 0 with
//      --stdin rank0 when gculaunch owns the terminal), so breakpoint() can
//      read without being stopped by SIGTTIN;
//   3. prctl(PR_SET_PDEATHSIG, SIGKILL), then compares getppid() with the
//      pid gculaunch recorded before fork: if gculaunch died in between, the
//      death signal was never armed and the child kills itself;
//   4. resets every signal disposition to SIG_DFL and clears the signal mask
//      (a job started with `&` ignores SIGINT, and so would every rank);
//   5. stdin from `stdin_fd` (or the inherited terminal), stdout and stderr
//      onto the rank's pipes;
//   6. marks every descriptor above 2 close-on-exec (defence against Boost
//      1.81's off-by-one in its own descriptor closing; nothing but 0, 1, 2
//      reaches the rank);
//   7. with --cpu-affinity, restricts itself to the rank's CPUs
//      (sched_setaffinity; cpu_affinity.h decides which);
//   8. gives the soft open-file limit gculaunch was started with back (gculaunch
//      raised its own to the hard limit for the store's connections);
//   9. optionally lowers its own priority (a warm-rank standby waits at nice +10 and
//      SCHED_IDLE): set before exec, so that no instruction of the new program runs at the
//      ranks' priority, and inherited by every thread it starts.
//
// Only async-signal-safe calls are made (the parent has threads): no malloc,
// no locks, no stdio.
//
// Thread safety: runs in a single-threaded forked child.
#pragma once

#include <sched.h>
#include <sys/types.h>

namespace gculaunch::sys {

struct ChildSetupParams {
  pid_t parent_pid = 0;        ///< getpid() of gculaunch, recorded before fork
  int stdin_fd = -1;           ///< dup2'ed onto 0; -1 keeps the inherited stdin
  int stdout_fd = -1;          ///< dup2'ed onto 1
  int stderr_fd = -1;          ///< dup2'ed onto 2
  bool take_terminal = false;  ///< make the child's group the terminal's foreground group
  bool pin_cpus = false;       ///< step 7: restrict the child to `cpus`
  cpu_set_t cpus{};            ///< built by the parent (no allocation in the child)
  /// Step 8: the soft RLIMIT_NOFILE to set (capped at the hard limit); 0: keep the inherited.
  unsigned long long open_files = 0;
  bool set_priority = false;  ///< step 9: setpriority(`nice`) and sched_setscheduler(`policy`)
  int nice = 0;
  int policy = 0;  ///< SCHED_OTHER, SCHED_BATCH or SCHED_IDLE
};

/// Runs steps 1-9.  Returns 0 or the errno of the step that failed (the
/// spawner reports it as a spawn failure).  Never returns if the parent died.
int RunChildSetup(const ChildSetupParams& params) noexcept;

/// Marks every descriptor above 2 close-on-exec.  Async-signal-safe:
/// close_range(CLOSE_RANGE_CLOEXEC) where the kernel has it (5.11+), else a
/// getdents64 walk of /proc/self/fd, else every number below RLIMIT_NOFILE.
void MarkAllCloexecAbove2() noexcept;

}  // namespace gculaunch::sys
