// Spawner: starts one child process with Boost.Process v2 and hands back its
// pid; nothing else about the child is kept here.
//
// Boost.Process v2 (Boost 1.81) is used only as a fork/exec engine:
//   - it runs on a dedicated io_context that owns no sockets and is never run
//     (Asio's fork notification touches every descriptor registered with the
//     context it is given, and its vfork launcher can corrupt a reactor);
//   - its exception-throwing overloads are never called (the executor + error
//     code overload is, see docs/runtime.md);
//   - the process object is detached at once: its destructor would SIGKILL
//     only the pid, and waiting belongs to the caller (ChildWatcher for ranks,
//     LocalCommandRunner for its one helper command);
//   - the child runs RunChildSetup() (child_setup.h) before exec.
// A child that forked but failed to exec is killed and reaped here, so every
// failure leaves no child behind.
//
// Lifetime: a launch keeps one Spawner for its whole run; LocalCommandRunner
// makes one per command.  Thread safety: call Spawn() from
// gculaunch's main thread only (PR_SET_PDEATHSIG is tied to the forking thread).
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "launcher/sys/thread_priority.h"

namespace gculaunch::sys {

struct SpawnRequest {
  std::string program;            ///< path of the executable, as ResolveProgram() returned it
  std::vector<std::string> argv;  ///< argv[0] included, passed verbatim
  std::vector<std::string> env;   ///< the complete environment, "KEY=VALUE"
  int stdin_fd = -1;              ///< -1: keep gculaunch's stdin (--stdin rank0)
  int stdout_fd = -1;
  int stderr_fd = -1;
  bool take_terminal = false;        ///< see ChildSetupParams
  std::vector<int> cpus;             ///< non-empty: the child pins itself to these CPUs
  std::optional<Priority> priority;  ///< set: the child sets it before exec (lower only)
};

/// Why a spawn failed; `error_number` is the errno (ENOENT, EACCES, ...).
struct SpawnError {
  Error error;
  int error_number = 0;
};

class Spawner {
 public:
  Spawner();
  ~Spawner();
  Spawner(const Spawner&) = delete;
  Spawner& operator=(const Spawner&) = delete;

  /// Every child gets this soft open-file limit (ChildSetupParams::open_files); 0: inherited.
  void set_child_open_files(unsigned long long soft) { child_open_files_ = soft; }

  /// Forks and execs.  On success the child is running the new program (exec
  /// succeeded) and leads its own process group; the caller must reap it.
  Result<pid_t> Spawn(const SpawnRequest& request, SpawnError* failure = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  unsigned long long child_open_files_ = 0;
};

/// Finds `name` the way execvp would: as given when it contains a '/',
/// otherwise in the directories of `path_env` (PATH).  The result must be a
/// regular file this process may execute.
Result<std::string> ResolveProgram(const std::string& name, const std::string& path_env);

}  // namespace gculaunch::sys
