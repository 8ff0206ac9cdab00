#include "launcher/sys/local_files.h"

#include <algorithm>
#include <filesystem>

#include "launcher/sys/safe_files.h"
#include "launcher/sys/spawner.h"

namespace gculaunch {

std::optional<std::string> LocalFileAccess::FindExecutable(const std::string& name,
                                                           const std::string& path_var) const {
  // An empty PATH finds nothing (a name with '/' is still looked at as a path).
  if (name.find('/') == std::string::npos && path_var.empty()) return std::nullopt;
  auto found = sys::ResolveProgram(name, path_var);
  if (!found.ok()) return std::nullopt;
  return *found;
}

bool LocalFileAccess::FileExists(const std::string& path) const {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

std::vector<std::string> LocalFileAccess::ListDir(const std::string& dir) const {
  std::vector<std::string> names;
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

Result<std::string> LocalFileAccess::ReadTextFile(const std::string& path) const {
  return sys::ReadBoundedFile(path);  // a regular file of at most 1 MiB: never /dev/zero
}

}  // namespace gculaunch
