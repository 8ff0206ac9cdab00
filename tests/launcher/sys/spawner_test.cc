#include "launcher/sys/spawner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>

#include "base/exit_codes.h"
#include "launcher/sys/unique_fd.h"
#include "launcher/sys/worker_exit.h"
#include "tests/support/test_util.h"

namespace gculaunch::sys {
namespace {

struct Captured {
  WorkerExit exit;
  std::string out;
};

// Spawns the helper with `steps`, collects its stdout and waits for it.
Captured RunHelper(Spawner& spawner, const std::vector<std::string>& steps) {
  auto out = MakePipe("test stdout");
  REQUIRE(out.ok());
  auto devnull = OpenCloexec("/dev/null", O_RDONLY);
  REQUIRE(devnull.ok());
  SpawnRequest request;
  request.program = testing::TestChild();
  request.argv = {"test_child"};
  request.argv.insert(request.argv.end(), steps.begin(), steps.end());
  request.env = {"PATH=/usr/bin:/bin", "GCULAUNCH_UNIT=1"};
  request.stdin_fd = devnull->get();
  request.stdout_fd = out->write.get();
  request.stderr_fd = 2;
  auto pid = spawner.Spawn(request);
  REQUIRE(pid.ok());
  out->write.Reset();
  Captured result;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(out->read.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    result.out.append(buf, static_cast<size_t>(n));
  }
  int status = 0;
  REQUIRE(::waitpid(*pid, &status, 0) == *pid);
  result.exit = WorkerExit::FromWaitStatus(status);
  return result;
}

}  // namespace

TEST_CASE("spawned rank sees only descriptors 0, 1 and 2", "[spawner]") {
  Spawner spawner;
  // Descriptors that are *not* close-on-exec, below and above Boost's error
  // pipe, must still not reach the child.
  const int low = ::open("/dev/null", O_RDONLY);
  REQUIRE(low >= 0);
  const int high = ::fcntl(low, F_DUPFD, 200);
  REQUIRE(high >= 200);
  const Captured result = RunHelper(spawner, {"fds"});
  ::close(low);
  ::close(high);
  CHECK(result.exit == WorkerExit::Exited(0));
  CHECK(result.out == "fds: 0 1 2\n");
}

TEST_CASE("spawned rank leads its own process group", "[spawner]") {
  Spawner spawner;
  const Captured result = RunHelper(spawner, {"pgid"});
  CHECK(result.exit.success());
  const std::string& out = result.out;
  // "pgid <pgid> pid <pid>"
  const size_t pid_at = out.find(" pid ");
  REQUIRE(pid_at != std::string::npos);
  CHECK(out.substr(5, pid_at - 5) == out.substr(pid_at + 5, out.size() - pid_at - 6));
  CHECK(out.substr(5, pid_at - 5) != std::to_string(::getpgrp()));
}

TEST_CASE("spawned rank starts with an empty signal mask and default dispositions", "[spawner]") {
  Spawner spawner;
  sigset_t block, old_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR1);
  REQUIRE(::sigprocmask(SIG_BLOCK, &block, &old_mask) == 0);
  struct sigaction ignore {
  }, old_int{};
  ignore.sa_handler = SIG_IGN;
  REQUIRE(::sigaction(SIGINT, &ignore, &old_int) == 0);
  const Captured result = RunHelper(spawner, {"sigstate"});
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  CHECK(result.out == "sigstate blocked=0000000000000000 ignored=0000000000000000\n");
}

TEST_CASE("spawned rank gets exactly the environment it was given", "[spawner]") {
  Spawner spawner;
  const Captured result = RunHelper(spawner, {"env", "GCULAUNCH_UNIT", "env", "HOME"});
  CHECK(result.out == "env GCULAUNCH_UNIT=1\nenv HOME unset\n");
}

TEST_CASE("a program that cannot be executed is an error and leaves no child", "[spawner]") {
  Spawner spawner;
  testing::TempDir dir;
  const std::string not_exec = dir.File("script.sh");
  testing::WriteFile(not_exec, "#!/bin/sh\nexit 0\n");
  for (const std::string& program : {std::string("/nonexistent/gculaunch-test"), not_exec}) {
    SpawnRequest request;
    request.program = program;
    request.argv = {program};
    request.stdout_fd = 1;
    request.stderr_fd = 2;
    SpawnError failure;
    auto pid = spawner.Spawn(request, &failure);
    REQUIRE_FALSE(pid.ok());
    CHECK(pid.error().what.find(program) != std::string::npos);
    CHECK((failure.error_number == ENOENT || failure.error_number == EACCES));
    errno = 0;
    CHECK(::waitpid(-1, nullptr, WNOHANG) == -1);
    CHECK(errno == ECHILD);
  }
}

TEST_CASE("ResolveProgram searches PATH like execvp", "[spawner]") {
  testing::TempDir dir;
  const std::string exe = dir.File("tool");
  testing::WriteFile(exe, "#!/bin/sh\n");
  REQUIRE(::chmod(exe.c_str(), 0755) == 0);
  const std::string plain = dir.File("plain");
  testing::WriteFile(plain, "data");

  auto found = ResolveProgram("tool", "/nonexistent:" + dir.path());
  REQUIRE(found.ok());
  CHECK(*found == exe);
  CHECK(ResolveProgram(exe, "").ok());

  auto missing = ResolveProgram("gculaunch-no-such-tool", dir.path());
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().what == "rank program 'gculaunch-no-such-tool' was not found on PATH");

  auto not_exec = ResolveProgram(plain, "");
  REQUIRE_FALSE(not_exec.ok());
  CHECK(not_exec.error().what.find("cannot be executed") != std::string::npos);

  auto directory = ResolveProgram(dir.path(), "");
  REQUIRE_FALSE(directory.ok());
}

}  // namespace gculaunch::sys

namespace gculaunch::sys {
namespace {

// In a forked child (its limit and table are its own): 0 when a spawn that finds no free
// descriptor fails as "no resources" (exit code 7, the limit to raise), not as "not found".
int CheckSpawnWithoutDescriptors() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 10;
  limit.rlim_cur = 64;
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) return 11;
  Spawner spawner;
  while (::open("/dev/null", O_RDONLY) >= 0) {
  }
  SpawnRequest request;
  request.program = "/bin/true";
  request.argv = {"true"};
  request.stdout_fd = 1;
  request.stderr_fd = 2;
  auto pid = spawner.Spawn(request);
  if (pid.ok()) return 12;
  if (pid.error().exit_code != exit_code::kNoResources) return 13;
  if (pid.error().hint.find("ulimit -n") == std::string::npos) return 14;
  return 0;
}

}  // namespace

TEST_CASE("a spawn without a free descriptor is reported as such, with exit code 7", "[spawner]") {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(CheckSpawnWithoutDescriptors());
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("a rank gets the open-file limit it is given back (gculaunch raised its own)",
          "[spawner]") {
  Spawner spawner;
  spawner.set_child_open_files(200);
  auto out = MakePipe("test stdout");
  REQUIRE(out.ok());
  SpawnRequest request;
  request.program = "/bin/sh";
  request.argv = {"sh", "-c", "ulimit -Sn"};
  request.stdout_fd = out->write.get();
  request.stderr_fd = 2;
  auto pid = spawner.Spawn(request);
  REQUIRE(pid.ok());
  out->write.Reset();
  std::string text;
  char buf[256];
  for (ssize_t n; (n = ::read(out->read.get(), buf, sizeof buf)) > 0;) {
    text.append(buf, static_cast<size_t>(n));
  }
  REQUIRE(::waitpid(*pid, nullptr, 0) == *pid);
  CHECK(text == "200\n");
}

}  // namespace gculaunch::sys
