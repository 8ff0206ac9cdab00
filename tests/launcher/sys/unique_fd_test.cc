#include "launcher/sys/unique_fd.h"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>

#include "base/exit_codes.h"

namespace gculaunch::sys {

TEST_CASE("pipes and files are close-on-exec from birth", "[unique_fd]") {
  auto pipe = MakePipe("test");
  REQUIRE(pipe.ok());
  CHECK((::fcntl(pipe->read.get(), F_GETFD) & FD_CLOEXEC) != 0);
  CHECK((::fcntl(pipe->write.get(), F_GETFD) & FD_CLOEXEC) != 0);
  auto file = OpenCloexec("/dev/null", O_RDONLY);
  REQUIRE(file.ok());
  CHECK((::fcntl(file->get(), F_GETFD) & FD_CLOEXEC) != 0);
  auto missing = OpenCloexec("/nonexistent/x", O_RDONLY);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().what == "cannot open /nonexistent/x: No such file or directory");
}

TEST_CASE("out of descriptors or memory is the no-resources exit, other errors the caller's",
          "[unique_fd]") {
  for (int err : {EMFILE, ENFILE, ENOMEM}) {
    CHECK(SysError("cannot create rank stdout pipe", err).exit_code == exit_code::kNoResources);
  }
  for (int err : {ENOENT, EACCES, EAGAIN}) CHECK(SysError("x", err).exit_code == 0);
  CHECK(SysError("x", EMFILE, "raise ulimit -n").hint == "raise ulimit -n");
}

TEST_CASE("UniqueFd owns, moves and closes", "[unique_fd]") {
  auto pipe = MakePipe("test");
  REQUIRE(pipe.ok());
  const int fd = pipe->read.get();
  UniqueFd moved(std::move(pipe->read));
  CHECK_FALSE(pipe->read.valid());
  CHECK(moved.get() == fd);
  UniqueFd other;
  other = std::move(moved);
  CHECK(other.get() == fd);
  other.Reset();
  CHECK(::fcntl(fd, F_GETFD) == -1);  // closed
  UniqueFd released(::dup(0));
  const int raw = released.Release();
  CHECK_FALSE(released.valid());
  CHECK(::fcntl(raw, F_GETFD) != -1);  // still open: ownership was given up
  ::close(raw);
}

TEST_CASE("SetNonBlocking toggles O_NONBLOCK", "[unique_fd]") {
  auto pipe = MakePipe("test");
  REQUIRE(pipe.ok());
  REQUIRE(SetNonBlocking(pipe->read.get(), true).ok());
  CHECK((::fcntl(pipe->read.get(), F_GETFL) & O_NONBLOCK) != 0);
  REQUIRE(SetNonBlocking(pipe->read.get(), false).ok());
  CHECK((::fcntl(pipe->read.get(), F_GETFL) & O_NONBLOCK) == 0);
  CHECK_FALSE(SetNonBlocking(-1, true).ok());
}

}  // namespace gculaunch::sys
