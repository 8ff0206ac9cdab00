// A directory held open by descriptor, and a check of who else may change a path.
//
// gculaunch writes its own log files (rank logs, error-file copies, events.jsonl, hang
// reports) into the run's log directory.  Looking that directory up by name again for every
// file would let whoever can rename one of its ancestors (a shared --log-dir without the
// sticky bit) swap it for a symlink after the start and receive, or redirect, the later
// files.  A HeldDir is opened once, one component at a time with O_NOFOLLOW (never through a
// symlink: O_NOFOLLOW alone guards only the last component, and openat2's
// RESOLVE_NO_SYMLINKS needs Linux 5.6), and every file below it is created relative to its
// descriptor the same way.  docs/security.md has the model.
//
// Thread safety: a HeldDir is immutable after it is made; copies share the descriptor.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "launcher/sys/unique_fd.h"

namespace gculaunch::sys {

class HeldDir {
 public:
  /// Opens the directory `path` (relative paths from the working directory), creating the
  /// components that are missing (mode 0777 less the umask, as mkdir -p).  Symlinks in the
  /// path as given are resolved once, first; the resolved path is then opened one component
  /// at a time without following any link, so a link planted meanwhile is an error, never a
  /// detour.  Errors name `path` and the reason.
  static Result<HeldDir> Open(const std::string& path);

  /// Creates a new directory "<prefix><6 random characters>" inside, mode 0700 (as mkdtemp),
  /// and holds it.
  Result<HeldDir> MakeUniqueChild(const std::string& prefix) const;

  /// Creates the directories of the relative path `rel` ("attempt_0/1") that are missing.
  Status MakeDirs(const std::string& rel) const;

  /// Opens the file `rel` (its directories created as by MakeDirs) with `flags` plus
  /// O_NOFOLLOW and O_CLOEXEC.
  Result<UniqueFd> OpenFile(const std::string& rel, int flags, mode_t mode = 0644) const;

  /// Writes `text` to the file `rel` whole: a new file with a random name beside it
  /// (O_EXCL), renamed over `rel`.
  Status WriteFile(const std::string& rel, std::string_view text, mode_t mode = 0644) const;

  /// The path of `rel` inside, for messages ("" gives the directory's own path).
  std::string PathOf(const std::string& rel = "") const;

  int fd() const { return fd_->get(); }

 private:
  HeldDir(std::shared_ptr<UniqueFd> fd, std::string path)
      : fd_(std::move(fd)), path_(std::move(path)) {}

  /// The directory that holds `rel` (created as by MakeDirs), and the last component's name.
  struct Parent {
    UniqueFd dir;
    std::string name;
  };
  Result<Parent> ParentOf(const std::string& rel) const;

  std::shared_ptr<UniqueFd> fd_;
  std::string path_;
};

/// Who besides `uid` and root could change what `path` names: the first component (walked
/// from "/" with lstat, symlinks followed at most 40 times, each link's own directory
/// checked) that is writable by its group or by others without the sticky bit, or owned by
/// another user, described as "/shared is writable by other users and not sticky (mode
/// 0777)".  Components that do not exist yet end the walk (gculaunch creates them).  None:
/// only `uid` and root can.
std::optional<std::string> FindForeignWriter(const std::string& path, uid_t uid);

/// `xdg_runtime_dir` ($XDG_RUNTIME_DIR) without trailing slashes when it is an absolute path
/// to a directory (not a link) that `uid` owns and nobody else may write; else "".
std::string PrivateRuntimeDir(const std::string& xdg_runtime_dir, uid_t uid);

}  // namespace gculaunch::sys
