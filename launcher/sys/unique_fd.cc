#include "launcher/sys/unique_fd.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gculaunch::sys {

void UniqueFd::Reset(int fd) {
  if (fd_ >= 0) {
    // close() must not be retried on EINTR on Linux: the descriptor is gone either way.
    ::close(fd_);
  }
  fd_ = fd;
}

Error SysError(const std::string& context, int err, std::string hint) {
  return Error{context + ": " + std::strerror(err), std::move(hint)};
}

Result<Pipe> MakePipe(const std::string& what) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return SysError("cannot create " + what + " pipe", errno,
                    "raise the open-file limit (ulimit -n) or free descriptors");
  }
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

Result<UniqueFd> OpenCloexec(const std::string& path, int flags, int mode) {
  int fd;
  do {
    fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return SysError("cannot open " + path, errno);
  return UniqueFd(fd);
}

Status SetNonBlocking(int fd, bool on) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) return SysError("fcntl(F_GETFL)", errno);
  const int wanted = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (wanted != flags && ::fcntl(fd, F_SETFL, wanted) != 0) {
    return SysError("fcntl(F_SETFL)", errno);
  }
  return OkStatus();
}

}  // namespace gculaunch::sys
