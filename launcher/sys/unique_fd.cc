#include "launcher/sys/unique_fd.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/exit_codes.h"

namespace gculaunch::sys {

void UniqueFd::Reset(int fd) {
  if (fd_ >= 0) {
    // close() must not be retried on EINTR on Linux: the descriptor is gone either way.
    ::close(fd_);
  }
  fd_ = fd;
}

// Out of descriptors or memory is the machine's state, not the program's fault: an error that
// stops the launch for it exits no_resources (7, class reschedule), as the spawner's does.
Error SysError(const std::string& context, int err, std::string hint) {
  const bool resources = err == EMFILE || err == ENFILE || err == ENOMEM;
  return Error{context + ": " + std::strerror(err), std::move(hint),
               resources ? exit_code::kNoResources : 0};
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
