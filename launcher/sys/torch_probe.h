// TorchProbe: what the ranks' interpreter would do (ranks_python.h): the torch it finds
// (ranks_torch.h) and, for a version manager's shim found on PATH, the interpreter the shim
// runs; learnt without making the launch wait for an interpreter.
//
// Start answers at once (Quick):
//   1. from the private cache (torch_cache.h) when it holds the question and every check
//      still holds: a few stat() calls;
//   2. else from the interpreter's files (python_files.h): pyenv's choice, and torch's
//      version.py on the search path the interpreter's layout gives.  What the files cannot
//      settle is unknown: the ranks get both NCCL names (ranks_torch.h), and a shim whose
//      choice is not known runs as it is.
// After a miss the probe is due: the interpreter (the shim, when there is one) run once with
// the ranks' environment and the probe program (find_spec, never an import; ranks_torch.h).
// Its answer is what the cache keeps, for the next launch.  Begin starts it: a launch does so
// a while after its ranks started (launch.h), 19 steps nicer than gculaunch, so that it never
// competes with their start-up; a shim's own start (pyenv runs some twenty shell processes)
// would otherwise slow it even at the lowest priority.  Finish begins it if needed and waits
// for it (bounded by TorchProbeOptions::timeout_s: the dry run); FinishIfDone takes it only
// when it has already exited and stops it otherwise (a launch, at its end: it never waits for
// the probe).  Both return what a launch started now would use: the probe's answer once it is
// cached, else Quick's, whose `how` then says what running the interpreter found and why it
// was not kept.
//
// The question (the key) is everything that decides what the interpreter's search finds: the
// interpreter as named, its real path and identity, the rank's sys.path[0] (the script's real
// directory, or the working directory for -m), the working directory, the variables that
// shape sys.path (PYTHONPATH, PYTHONHOME, PYTHONUSERBASE, PYTHONNOUSERSITE, PYTHONSAFEPATH,
// PYTHONPLATLIBDIR, HOME) and those that steer a shim (PATH, kShimVariables).  The answer
// holds the identity (device, inode, size, mtime, ctime), as the interpreter saw it, of
// torch/version.py and of every name under which torch could appear in a sys.path entry
// searched before the one that holds it (mostly "absent"; kTorchProbeSource), and for a shim
// the identity, as gculaunch saw it before the probe started, of every file that could change
// its choice (ShimSelectionFiles: .python-version in the working directory and above, ...)
// and of the interpreter it chose: installing, upgrading or removing torch or an interpreter,
// or shadowing torch, changes one of them, so a hit re-checks each with one stat() and is a
// miss when any differs.  An interpreter wrapper that runs Python in another root (a
// container, a chroot) sees other files than gculaunch: it gets no entry.
//
// The probe is bounded (timeout_s); whatever goes wrong (no interpreter, a timeout, output
// that is not the probe's) leaves Quick's answer in force.
//
// Thread safety: TorchProbe is used from the main thread (RunningCommand's rule); the free
// functions have no state.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/env_map.h"
#include "base/error.h"
#include "launcher/frontend/launch_spec.h"
#include "launcher/frontend/ranks_python.h"
#include "launcher/frontend/ranks_torch.h"
#include "launcher/sys/python_files.h"
#include "launcher/sys/torch_cache.h"

namespace gculaunch {

class RunningCommand;  // command_runner.h
struct CommandOutcome;

namespace sys {

/// The key for the probe's command line (TorchProbeArgv), its environment and the working
/// directory.  Stats and resolves the interpreter.
std::string TorchCacheKey(const std::vector<std::string>& probe_argv, const EnvMap& probe_env,
                          const std::string& cwd);

struct TorchProbeOptions {
  bool cache = false;     ///< use the cache (TorchCacheDir::Open(cache_env, uid, ...))
  EnvMap cache_env;       ///< XDG_CACHE_HOME and HOME: where the cache is
  uid_t uid = 0;          ///< the cache's owner (geteuid())
  double timeout_s = 10;  ///< the probe's bound, from Start
  std::string cwd;        ///< the ranks' working directory (for the key); "": getcwd()
  int nice = 0;           ///< added to the probe's niceness (a launch: 19)
};

/// The launch's options: the cache of geteuid() below `env`'s XDG_CACHE_HOME or HOME, the
/// default bound, the probe at nice 19.
TorchProbeOptions TorchProbeOptionsFor(const EnvMap& env);

class TorchProbe {
 public:
  /// Answers from the cache or the files (starts nothing).  With --no-python: nothing to
  /// learn.  `env` is gculaunch's environment, as BuildRankEnv takes it.
  static TorchProbe Start(const LaunchSpec& spec, const EnvMap& env, TorchProbeOptions options);
  TorchProbe(TorchProbe&&) noexcept;
  TorchProbe& operator=(TorchProbe&&) noexcept;
  ~TorchProbe();

  /// The answer a launch uses now: the cache's, or the files'.
  const RanksPython& Quick() const { return quick_; }

  /// Starts the probe when one is due (after a miss) and not started yet; returns at once.
  void Begin();

  /// After a miss: begins the probe if needed, waits for it (bounded), caches its answer and
  /// returns what a launch would use now (see the header).  Without a probe: Quick().
  /// REQUIRES: called once, and FinishIfDone not called.
  RanksPython Finish();

  /// Finish when the probe has exited already; otherwise stops it (its group killed and
  /// reaped) and returns nullopt, as it does when no probe was begun.  REQUIRES: called once,
  /// and Finish not called.
  std::optional<RanksPython> FinishIfDone();

  /// True when no probe is due or running (a cache hit, --no-python, or finished).
  bool answered() const { return !due_ && !running_; }

 private:
  TorchProbe() = default;
  RanksPython Conclude(const CommandOutcome& outcome);
  RanksPython FromEntry(const TorchCacheEntry& entry) const;
  void QuickFromFiles(const std::string& mode, const std::string& where, const EnvMap& probe_env);
  ShimChoice ChoiceOf(const std::string& executable, const std::string& pyenv_version,
                      const std::string& how) const;
  void Cache(TorchCacheEntry entry, RanksPython& answer);

  TorchProbeOptions options_;
  std::string python_;  ///< what the probe runs: the spec's interpreter, or the shim
  std::string key_;
  std::optional<Shim> shim_;
  /// The shim's selection files and their signatures, taken before the probe started.
  std::vector<std::pair<std::string, std::string>> selection_checks_;
  std::optional<TorchCacheDir> cache_dir_;
  RanksPython quick_;
  std::vector<std::string> argv_;  ///< the probe's command line and environment, for Begin
  EnvMap env_;
  bool due_ = false;  ///< a miss: the probe is to be begun
  std::unique_ptr<RunningCommand> running_;
};

/// The interpreter's environment for the probe: rank 0's (BuildRankEnv), without the
/// Python shim, the stack-dump hook and a shim's variables, which are gculaunch's own.
EnvMap TorchProbeEnv(const LaunchSpec& spec, const EnvMap& env);

}  // namespace sys
}  // namespace gculaunch
