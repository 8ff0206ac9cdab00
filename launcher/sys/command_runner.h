// CommandRunner: runs one short helper program to completion, time-limited,
// and collects its output.  Used by `gculaunch check` for the Python probe
// (exactly the interpreter and environment a rank would get).
//
// This is a blocking call for a single, short child, not how ranks are
// supervised, but the child is started the way ranks are: by sys::Spawner
// (spawner.h), so it leads its own process group, gets default signal
// dispositions, an empty signal mask and a parent-death signal, and inherits
// nothing but stdin (/dev/null) and its two output pipes.  When the child
// exits, the helpers it left in its group are killed; at the deadline the
// whole group is killed with SIGKILL (a probe that hangs in a driver call may
// have started helpers of its own).  Either way the group is signalled while
// the child is still unreaped, so its number cannot belong to anyone else yet,
// and the child is then reaped here with waitpid().
//
// Ownership: Run() returns only after the child has been reaped; it leaves no
// process behind except members of the group that survive SIGKILL (none can),
// or, when not even SIGKILL could be sent (never for a child of ours; `error`
// then says so), the running child.  While Run() waits, SIGCHLD is kept from
// being ignored (else the kernel would reap the child and lose its status);
// the previous disposition is restored afterwards.
// Thread safety: LocalCommandRunner has no state.  Call Run() from the main
// thread (the spawner's rule: the parent-death signal follows the thread that
// forked), one call at a time, in a process where nothing waits for any child
// (waitpid(-1)); ChildWatcher waits only for the pids it was given, and
// `gculaunch check` has none.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/env_map.h"

namespace gculaunch {

struct CommandOutcome {
  enum class Kind {
    kExited,       ///< exited with `code`
    kSignaled,     ///< killed by signal `code`
    kTimedOut,     ///< still running at the deadline: its group was killed
    kSpawnFailed,  ///< could not be started: `error` says why
  };
  Kind kind = Kind::kExited;
  int code = 0;
  std::string out;  ///< stdout (at most kMaxOutput bytes kept)
  std::string err;  ///< stderr (at most kMaxOutput bytes kept)
  /// kSpawnFailed: the reason, e.g. "No such file or directory" (or, never in
  /// practice, why the child's status was lost).  Other kinds: empty, or why
  /// waiting or killing the group failed.
  std::string error;

  static constexpr size_t kMaxOutput = 1 << 20;
};

class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  /// Runs argv[0] (a path; no PATH search) with exactly `env`, for at most
  /// `timeout_s` seconds.  REQUIRES: !argv.empty().
  virtual CommandOutcome Run(const std::vector<std::string>& argv, const EnvMap& env,
                             double timeout_s) const = 0;
};

/// The real runner: sys::Spawner, pipes for stdout/stderr, poll with a deadline.
class LocalCommandRunner : public CommandRunner {
 public:
  CommandOutcome Run(const std::vector<std::string>& argv, const EnvMap& env,
                     double timeout_s) const override;
};

/// LocalCommandRunner::Run in two halves, so that the caller can do other work while the
/// child runs: Start spawns it, Finish collects it as Run does.  The deadline counts from
/// Start.  The child's output waits in its pipes meanwhile, so it suits a child that writes
/// less than a pipe holds (64 KiB) before it exits; more only makes it wait for Finish.
/// Destroying a started command without Finish kills its group and reaps it.
/// Thread safety: as Run (main thread; nothing else may wait for any child).
class RunningCommand {
 public:
  /// Never null; a child that could not be started is reported by Finish (kSpawnFailed).
  /// `nice` (0..19) is added to the child's niceness once it runs (a helper in the background
  /// yields to the ranks).  REQUIRES: !argv.empty().
  static std::unique_ptr<RunningCommand> Start(const std::vector<std::string>& argv,
                                               const EnvMap& env, double timeout_s, int nice = 0);
  ~RunningCommand();
  RunningCommand(const RunningCommand&) = delete;
  RunningCommand& operator=(const RunningCommand&) = delete;

  /// Waits until the child exits or the deadline passes; as Run.  REQUIRES: called once.
  CommandOutcome Finish();

  /// True once the child has exited (or could not be started): Finish then returns at once.
  /// Does not reap it.
  bool Exited() const;

 private:
  struct State;
  explicit RunningCommand(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace gculaunch
