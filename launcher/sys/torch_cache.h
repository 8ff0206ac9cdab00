// TorchCache: the private cache of the torch probe (torch_probe.h): one small file per
// question in $XDG_CACHE_HOME/gculaunch/torch-versions (else $HOME/.cache/gculaunch/...).
//
// Trust (docs/security.md): another local user must neither plant an answer nor make
// gculaunch write or delete files where that user chooses.  A path checked once and used by
// name later can be swapped between the two (a missing XDG_CACHE_HOME that another user
// creates as a symlink to a directory of theirs: the hostile probe of 2026-11-28 had root
// write an entry there).  So the directory is reached one component at a time from "/",
// each opened relative to the descriptor of the one before with O_NOFOLLOW | O_DIRECTORY
// (created with mkdirat, 0700, when missing) and checked through that descriptor:
//   * the components of XDG_CACHE_HOME (or $HOME/.cache) and the directories their links
//     lead through: owned by the user or root, and writable by nobody else unless sticky
//     (/tmp is fine: there nobody else can replace an entry the user owns);
//   * a symbolic link on the way: owned by the user or root, in such a directory; it is
//     followed (at most 40), its target walked the same way;
//   * gculaunch's own two, gculaunch/ and torch-versions/: owned by the user and writable by
//     nobody else.
// The descriptor of torch-versions/ is then held, and every entry is read, written (a new
// file renamed over the old) and pruned relative to it, never by path.  Pruning removes only
// regular files of the user whose text starts with gculaunch's marker (kTorchCacheMarker),
// never any other file that happens to have a 16-hex-digit name.  An entry is read only when
// it is a regular file (not through a link) owned by the user and writable by nobody else.
// A cache that cannot be used costs the probe, never the launch.
//
// Thread safety: a TorchCacheDir is immutable once opened; its copies share the descriptor.
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
#include "launcher/sys/unique_fd.h"

namespace gculaunch::sys {

/// What the cache compares: "<dev>:<ino>:<size>:<mtime ns>:<ctime ns>" of what `path` names
/// (symlinks followed), "absent" when it does not exist, "error" when stat() failed otherwise.
std::string FileSignature(const std::string& path);

/// `bytes` as lower-case hex: how the entries (and the key's parts) hold any byte.
std::string CacheHex(std::string_view bytes);

/// FNV-1a (64 bits) of `bytes` as 16 hex digits: a name that stays the same from one build to
/// the next (std::hash may not).
std::string CacheHash(std::string_view bytes);

/// Every entry's text starts with it (then a format number): the mark that lets pruning
/// tell gculaunch's entries from anything else.
inline constexpr std::string_view kTorchCacheMarker = "gculaunch torch cache ";

struct TorchCacheEntry {
  std::string key;           ///< the question (TorchCacheKey in torch_probe.h)
  bool found = false;        ///< torch was found (else: no torch on the search path)
  std::string version;       ///< found: __version__
  std::string version_file;  ///< found: torch/version.py
  /// (path, FileSignature) pairs that must still hold: version.py, the search path, and for a
  /// shim the files that choose its interpreter and the interpreter itself.
  std::vector<std::pair<std::string, std::string>> checks;
  std::string executable;     ///< the interpreter's sys.executable (behind a shim: its choice)
  std::string pyenv_version;  ///< PYENV_VERSION as the interpreter saw it; empty: unset
};

/// The file's text: the marker's header line, then one "name hex" line per field (paths in
/// hex, so that any byte fits).  Parse gives nullopt for anything else.
std::string FormatTorchCacheEntry(const TorchCacheEntry& entry);
std::optional<TorchCacheEntry> ParseTorchCacheEntry(std::string_view text);

/// The cache directory, held open.
class TorchCacheDir {
 public:
  /// Opens the cache directory of `uid` for `env` (XDG_CACHE_HOME when it is absolute, else
  /// HOME/.cache), walking and checking it as the header says; with `create`, the missing
  /// components are made (0700).  The error is one line naming the path and why it is not
  /// used ("... does not exist yet" without `create`).
  static Result<TorchCacheDir> Open(const EnvMap& env, uid_t uid, bool create);

  /// The entry for `key` when it may be trusted and still holds: a regular file (no link
  /// followed) owned by the user, writable by nobody else, that parses, whose key is `key`
  /// and whose every check still has its signature.  nullopt otherwise.
  std::optional<TorchCacheEntry> Read(const std::string& key) const;

  /// Writes `entry` (mode 0600, a new file renamed over the old one), then prunes the
  /// directory to its kMaxEntries newest entries.  The error names the file.
  Status Write(const TorchCacheEntry& entry) const;

  /// Removes the oldest entries (by mtime) beyond `keep`: regular files of the user with a
  /// 16-hex-digit name whose text starts with kTorchCacheMarker; nothing else.
  void Prune(size_t keep) const;

  /// The file name of `key`: 16 hex digits, a hash of the key (which the file repeats).
  static std::string FileName(const std::string& key);

  const std::string& path() const { return path_; }

  static constexpr size_t kMaxEntries = 256;

 private:
  TorchCacheDir(std::shared_ptr<UniqueFd> fd, std::string path, uid_t uid)
      : fd_(std::move(fd)), path_(std::move(path)), uid_(uid) {}

  std::shared_ptr<UniqueFd> fd_;
  std::string path_;
  uid_t uid_ = 0;
};

}  // namespace gculaunch::sys
