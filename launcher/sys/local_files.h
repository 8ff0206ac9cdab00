// LocalFileAccess: the real FileAccess (launcher/frontend/file_access.h): executables found as
// execvp finds them (sys::ResolveProgram), text files and directory listings read from the file
// system.
//
// Thread safety: no state.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/frontend/file_access.h"

namespace gculaunch {

class LocalFileAccess : public FileAccess {
 public:
  std::optional<std::string> FindExecutable(const std::string& name,
                                            const std::string& path_var) const override;
  Result<std::string> ReadTextFile(const std::string& path) const override;
  std::vector<std::string> ListDir(const std::string& dir) const override;
  bool FileExists(const std::string& path) const override;
};

}  // namespace gculaunch
