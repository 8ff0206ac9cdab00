#include "launcher/sys/termination_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "launcher/sys/unique_fd.h"

namespace gculaunch::sys {

std::string ChooseTerminationLog(const std::string& given) {
  if (given == "none") return "";
  if (!given.empty()) return given;
  struct stat st {};
  if (::lstat(kDefaultTerminationLog, &st) != 0 || !S_ISREG(st.st_mode)) return "";
  if (::access(kDefaultTerminationLog, W_OK) != 0) return "";
  return kDefaultTerminationLog;
}

Status WriteTerminationLog(const std::string& path, const std::string& text) {
  const std::string what = "--termination-log " + path + ": ";
  // O_NONBLOCK: a FIFO planted at the path must not block the exit (refused below).
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) {
    const int err = errno;
    if (err == ELOOP) {
      return Error{what + "is a symbolic link; not written through it",
                   "give the file itself (Kubernetes bind-mounts a regular file there)"};
    }
    return Error{what + std::strerror(err),
                 "give an existing file this user may write, or --termination-log none"};
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Error{what + "is not a regular file", "give a regular file, or --termination-log none"};
  }
  if (::ftruncate(fd.get(), 0) != 0) {
    return Error{what + "cannot truncate: " + std::strerror(errno), "check the file's permissions"};
  }
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd.get(), p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return Error{what + "cannot write: " + std::strerror(errno), "check the file system"};
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return OkStatus();
}

}  // namespace gculaunch::sys
