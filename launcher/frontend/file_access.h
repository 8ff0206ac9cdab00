// FileAccess: the file-system look-ups of the front end (MakeLaunchSpec, the etcd settings'
// password and certificate files, the profile catalog), behind an interface so that the front
// end stays pure; the real one is sys/local_files.h, tests use fakes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/error.h"

namespace gculaunch {

/// The file-system look-ups MakeLaunchSpec needs besides the device probe (the real one is
/// sys/local_files.h).
class FileAccess {
 public:
  virtual ~FileAccess() = default;
  /// `name` without '/': the first executable file named so in the
  /// ':'-separated `path_var` directories (as execvp searches), as a path.
  /// `name` with '/': itself if it is an executable file.  nullopt otherwise.
  virtual std::optional<std::string> FindExecutable(const std::string& name,
                                                    const std::string& path_var) const = 0;
  /// The whole content of a text file: a regular file of at most 1 MiB (LocalFileAccess); the
  /// error names the file and the reason, with a hint when the reason has its own fix.
  virtual Result<std::string> ReadTextFile(const std::string& path) const = 0;
  /// Whether `path` names an existing file (of any kind, executable or not): tells "not
  /// executable" (exit 126) from "not found" (exit 127).
  virtual bool FileExists(const std::string& /*path*/) const { return false; }
  /// The entry names of a directory, sorted; empty when it cannot be read
  /// (e.g. it does not exist).  Used for profile directories (profile_catalog.h).
  virtual std::vector<std::string> ListDir(const std::string& /*dir*/) const { return {}; }
};

}  // namespace gculaunch
