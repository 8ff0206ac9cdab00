// WorkerExit: how one process ended, decoded from a wait status.
//
// A value type with exactly two shapes: exited with a code, or killed by a
// signal.  ShellCode() maps it onto the shell convention (code, or 128+signal)
// that gculaunch uses for its own exit code.
#pragma once

#include <string>

namespace gculaunch {

struct WorkerExit {
  enum class Kind { kExited, kSignaled };
  Kind kind = Kind::kExited;
  int value = 0;  ///< the exit code (kExited) or the signal number (kSignaled)

  static WorkerExit Exited(int code) { return {Kind::kExited, code}; }
  static WorkerExit Signaled(int sig) { return {Kind::kSignaled, sig}; }
  /// Decodes a status as returned by waitpid()/waitid() (WIFEXITED/WIFSIGNALED).
  static WorkerExit FromWaitStatus(int status);

  bool success() const { return kind == Kind::kExited && value == 0; }
  /// The exit code a shell would report: the code, or 128 + signal.
  int ShellCode() const;
  /// "exit code 3" or "signal 9 (SIGKILL)".
  std::string Describe() const;
  bool operator==(const WorkerExit&) const = default;
};

/// "SIGKILL" for 9, "SIG42" for unnamed signals.
std::string SignalName(int sig);

}  // namespace gculaunch
