// UniqueFd: sole owner of one file descriptor, and the helpers that create
// descriptors for gculaunch.
//
// Every descriptor gculaunch opens is close-on-exec from birth (pipe2 with
// O_CLOEXEC, open with O_CLOEXEC): Boost.Process v2 in Boost 1.81 fails to
// close some descriptors in children (see docs/runtime.md), so a descriptor
// that is not close-on-exec would leak into every rank.  The only way a
// descriptor reaches a child is dup2() onto 0, 1 or 2 in the child setup.
//
// Lifetime: the descriptor is closed by the destructor or Reset().  Move-only.
// Thread safety: a UniqueFd is used by one thread at a time.
#pragma once

#include <string>
#include <utility>

#include "base/error.h"

namespace gculaunch::sys {

class UniqueFd {
 public:
  UniqueFd() = default;
  /// Takes ownership of `fd` (-1 means empty).
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  /// Gives up ownership without closing.
  int Release() { return std::exchange(fd_, -1); }
  /// Closes the descriptor (if any) and takes `fd` instead.
  void Reset(int fd = -1);

 private:
  int fd_ = -1;
};

/// Both ends of a pipe, each close-on-exec.
struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

/// pipe2(O_CLOEXEC).  `what` names the pipe in the error message.
Result<Pipe> MakePipe(const std::string& what);

/// open(path, flags | O_CLOEXEC, mode).
Result<UniqueFd> OpenCloexec(const std::string& path, int flags, int mode = 0644);

/// An Error for a failed system call: "<context>: <strerror(err)>".
Error SysError(const std::string& context, int err, std::string hint = {});

/// Sets or clears O_NONBLOCK.  Only for descriptors gculaunch created itself
/// (never for the stdio it inherited: the shell shares those).
Status SetNonBlocking(int fd, bool on);

}  // namespace gculaunch::sys
