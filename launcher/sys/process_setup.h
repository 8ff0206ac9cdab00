// Process-wide settings of gculaunch itself, made once at the start of a
// launch, and the terminal hand-over for --stdin rank0.
//
//   EnsureStdioOpen   descriptors 0, 1, 2 exist (else /dev/null): a pipe
//                     must never land on 1 or 2 by accident
//   IgnoreSigpipe     a closed console gives EPIPE to the writer thread
//                     instead of killing gculaunch (ranks get SIG_DFL back)
//   DefaultSigchld    SIGCHLD back to SIG_DFL: inherited as SIG_IGN, the kernel
//                     would reap the ranks itself and their exit codes be lost
//   HoldStopSignals   blocks SIGINT, SIGTERM, SIGQUIT, SIGHUP, SIGUSR1 and SIGUSR2 while
//                     the launch is prepared: one that arrives before the supervisor
//                     watches them waits, pending, instead of ending gculaunch by its
//                     default action with no summary, no termination message and exit
//                     "killed by SIGTERM" instead of 143
//   ReleaseStopSignals unblocks them once the supervisor's handlers are installed: a
//                     pending one is delivered to those handlers at once.  Children
//                     started meanwhile get an empty mask (child_setup.h, the guardian)
//   SignalIgnored     whether a signal was inherited as SIG_IGN (nohup)
//   OwnsTerminal      stdin is a terminal and gculaunch's group is in front
//   ReclaimTerminal   makes gculaunch's group the terminal's foreground again
//
// Thread safety: call from the main thread before other threads exist
// (ReclaimTerminal: main thread).
#pragma once

#include <string>

namespace gculaunch::sys {

void EnsureStdioOpen();
void IgnoreSigpipe();
void DefaultSigchld();
void HoldStopSignals();
void ReleaseStopSignals();
bool SignalIgnored(int sig);
bool StdinIsTerminal();
bool OwnsTerminal();
void ReclaimTerminal();
/// gethostname(), or "" on failure.
std::string HostName();

}  // namespace gculaunch::sys
