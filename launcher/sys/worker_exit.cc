#include "launcher/sys/worker_exit.h"

#include <sys/wait.h>

#include <csignal>
#include <cstring>

#include "base/exit_codes.h"

namespace gculaunch {

WorkerExit WorkerExit::FromWaitStatus(int status) {
  if (WIFSIGNALED(status)) return Signaled(WTERMSIG(status));
  return Exited(WEXITSTATUS(status));
}

int WorkerExit::ShellCode() const {
  return kind == Kind::kExited ? value : exit_code::kSignalBase + value;
}

std::string WorkerExit::Describe() const {
  if (kind == Kind::kExited) return "exit code " + std::to_string(value);
  return "signal " + std::to_string(value) + " (" + SignalName(value) + ")";
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  if (abbrev == nullptr) return "SIG" + std::to_string(sig);
  return std::string("SIG") + abbrev;
}

}  // namespace gculaunch
