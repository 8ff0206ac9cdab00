// TorchProbe: the torch version the ranks' interpreter would import (ranks_torch.h), learnt
// by running that interpreter once with the ranks' environment and the probe program
// (find_spec, never an import), and kept in a private cache so that later launches pay only
// a few stat() calls.
//
// The cache is one small file per question in $XDG_CACHE_HOME/gculaunch/torch-versions (else
// $HOME/.cache/gculaunch/torch-versions).  The question (the key) is everything that decides
// what the interpreter's search finds: the interpreter as named, its real path and identity,
// the rank's sys.path[0] (the script's real directory, or the working directory for -m), the
// working directory, and the variables that shape sys.path (PYTHONPATH, PYTHONHOME,
// PYTHONUSERBASE, PYTHONNOUSERSITE, PYTHONSAFEPATH, PYTHONPLATLIBDIR, HOME, PYENV_VERSION).
// The answer holds the identity (device, inode, size, mtime, ctime), as the interpreter saw
// it, of torch/version.py and of every name under which torch could appear in a sys.path
// entry searched before the one that holds it (mostly "absent"; kTorchProbeSource):
// installing, upgrading or removing torch, or shadowing it, changes one of them, so a hit
// re-checks each with one stat() and is a miss when any differs.  An interpreter wrapper that
// runs Python in another root (a container, a chroot) sees other files than gculaunch: it gets
// no entry, and is probed every time (still right).
//
// Trust (docs/security.md): another local user must not be able to plant an answer.  The
// directory is used only when FindForeignWriter finds nobody but the user and root able to
// change it (created 0700 when missing); a file is read only when it is a regular file (not
// through a symlink) owned by the user and writable by nobody else, and it is written 0600
// through a temporary file.  A cache that cannot be used costs the probe, never the launch.
//
// The probe is bounded (TorchProbeOptions::timeout_s); whatever goes wrong (no interpreter,
// a timeout, output that is not the probe's) gives RanksTorch::State::kUnknown, and the
// ranks get both variables.
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
#include "launcher/frontend/ranks_torch.h"

namespace gculaunch {

class RunningCommand;  // command_runner.h

namespace sys {

/// What the cache compares: "<dev>:<ino>:<size>:<mtime ns>:<ctime ns>" of what `path` names
/// (symlinks followed), "absent" when it does not exist, "error" when stat() failed otherwise.
std::string FileSignature(const std::string& path);

struct TorchCacheEntry {
  std::string key;           ///< the question (TorchCacheKey)
  bool found = false;        ///< torch was found (else: no torch on the search path)
  std::string version;       ///< found: __version__
  std::string version_file;  ///< found: torch/version.py
  /// (path, FileSignature) pairs that must still hold: version.py and the search path.
  std::vector<std::pair<std::string, std::string>> checks;
};

/// The file's text: a header line, then one "name hex" line per field (paths in hex, so that
/// any byte fits).  Parse gives nullopt for anything else.
std::string FormatTorchCacheEntry(const TorchCacheEntry& entry);
std::optional<TorchCacheEntry> ParseTorchCacheEntry(std::string_view text);

/// The key for the probe's command line (TorchProbeArgv), its environment and the working
/// directory.  Stats and resolves the interpreter.
std::string TorchCacheKey(const std::vector<std::string>& probe_argv, const EnvMap& probe_env,
                          const std::string& cwd);

/// The cache directory for `uid`: $XDG_CACHE_HOME/gculaunch/torch-versions when
/// XDG_CACHE_HOME is absolute, else $HOME/.cache/gculaunch/torch-versions; nullopt when there is
/// none, or when FindForeignWriter finds someone else able to change it (`why` then says who). Does
/// not create it.
std::optional<std::string> TorchCacheDir(const EnvMap& env, uid_t uid, std::string* why = nullptr);

/// The file of `key` in `dir`: 16 hex digits, a hash of the key (which the file repeats).
std::string TorchCacheFile(const std::string& dir, const std::string& key);

/// The entry in `path` when it may be trusted and still holds: a regular file (no symlink
/// followed) owned by `uid`, writable by nobody else, that parses, whose key is `key`, and
/// whose every check still has its signature.  nullopt otherwise.
std::optional<TorchCacheEntry> ReadTorchCacheFile(const std::string& path, const std::string& key,
                                                  uid_t uid);

/// Writes `entry` to TorchCacheFile(dir, entry.key), mode 0600, creating `dir` (0700) and its
/// parents, then prunes the directory to its 256 newest entries.  The error names the file.
Status WriteTorchCacheFile(const std::string& dir, const TorchCacheEntry& entry);

/// Removes the oldest entries of `dir` (by mtime) beyond `keep`; leaves other files alone.
void PruneTorchCache(const std::string& dir, size_t keep);

struct TorchProbeOptions {
  std::string cache_dir;  ///< "" : no cache
  uid_t uid = 0;          ///< the cache's owner (geteuid())
  double timeout_s = 10;  ///< the probe's bound, from Start
  std::string cwd;        ///< the ranks' working directory (for the key); "": getcwd()
};

/// The launch's options: the cache of TorchCacheDir for geteuid() (none when it may not be
/// trusted), the default bound.
TorchProbeOptions TorchProbeOptionsFor(const EnvMap& env);

class TorchProbe {
 public:
  /// Answers from the cache, or starts the interpreter (and returns at once).  With
  /// --no-python: kNotProbed at once.  `env` is gculaunch's environment, as BuildRankEnv
  /// takes it.
  static TorchProbe Start(const LaunchSpec& spec, const EnvMap& env, TorchProbeOptions options);
  TorchProbe(TorchProbe&&) noexcept;
  TorchProbe& operator=(TorchProbe&&) noexcept;
  ~TorchProbe();

  /// The answer: after a miss, waits for the probe (bounded), reads version.py and writes
  /// the cache.  REQUIRES: called once.
  RanksTorch Finish();

  /// True when Start answered from the cache (or needed no probe).
  bool answered() const { return !running_; }

 private:
  TorchProbe() = default;

  TorchProbeOptions options_;
  std::string python_;
  std::string key_;
  RanksTorch answer_;
  std::unique_ptr<RunningCommand> running_;
};

/// The interpreter's environment for the probe: rank 0's (BuildRankEnv), without the
/// Python shim and the stack-dump hook, which are gculaunch's own.
EnvMap TorchProbeEnv(const LaunchSpec& spec, const EnvMap& env);

}  // namespace sys
}  // namespace gculaunch
