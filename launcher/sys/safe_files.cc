#include "launcher/sys/safe_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "launcher/sys/unique_fd.h"

namespace gculaunch::sys {

namespace {

Status WriteAll(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error{std::strerror(errno), ""};
    text.remove_prefix(static_cast<size_t>(n));
  }
  return OkStatus();
}

}  // namespace

Status ReplaceFile(const std::string& path, std::string_view text, mode_t mode) {
  const std::filesystem::path target(path);
  const std::string dir = target.has_parent_path() ? target.parent_path().string() : ".";
  std::string temp = dir + "/." + target.filename().string() + ".XXXXXX";
  const int raw = ::mkostemp(temp.data(), O_CLOEXEC);
  if (raw < 0) {
    return Error{"cannot write " + path + ": cannot create a temporary file in " + dir + ": " +
                     std::strerror(errno),
                 "check that the directory exists and is writable"};
  }
  UniqueFd fd(raw);
  Status written = WriteAll(fd.get(), text);
  if (written.ok() && ::fchmod(fd.get(), mode) != 0) written = Error{std::strerror(errno), ""};
  if (written.ok() && ::close(fd.Release()) != 0) written = Error{std::strerror(errno), ""};
  if (written.ok() && ::rename(temp.c_str(), path.c_str()) != 0) {
    written = Error{std::strerror(errno), ""};
  }
  if (!written.ok()) {
    ::unlink(temp.c_str());
    return Error{"cannot write " + path + ": " + written.error().what,
                 "check the path, its permissions and the free space"};
  }
  return OkStatus();
}

Status WriteSiteDir(const std::string& flag, const std::string& dir,
                    const std::vector<std::pair<std::string_view, std::string_view>>& files) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return Error{flag + ": cannot create '" + dir + "': " + ec.message(),
                 "check the permissions of --log-dir (or of the temporary directory)"};
  }
  for (const auto& [name, text] : files) {
    const std::string path = dir + "/" + std::string(name);
    if (Status written = ReplaceFile(path, text, 0644); !written.ok()) {
      return Error{flag + ": " + written.error().what,
                   "check the permissions and free space of --log-dir (or of the temporary "
                   "directory)"};
    }
  }
  return OkStatus();
}

}  // namespace gculaunch::sys
