#include "launcher/sys/command_runner.h"

#include <sys/prctl.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "tests/support/frontend_fakes.h"

namespace gculaunch {
namespace {

using testing::TempDir;

CommandOutcome Shell(const std::string& script, const EnvMap& env = {}, double timeout_s = 60) {
  return LocalCommandRunner().Run({"/bin/sh", "-c", script}, env, timeout_s);
}

TEST_CASE("command runner: exit code, both streams and exactly the given environment",
          "[command_runner]") {
  const CommandOutcome outcome = Shell("echo \"$FOO\"; env | grep -c . >&2; exit 3",
                                       EnvMap{{"FOO", "bar baz"}, {"PATH", "/usr/bin:/bin"}});
  CHECK(outcome.kind == CommandOutcome::Kind::kExited);
  CHECK(outcome.code == 3);
  CHECK(outcome.out == "bar baz\n");
  // FOO, PATH and what sh adds itself (PWD, maybe SHLVL and _): nothing inherited.
  CHECK(std::stoi(outcome.err) <= 5);
}

TEST_CASE("command runner: the child reads /dev/null and leads its own group", "[command_runner]") {
  const CommandOutcome outcome =
      Shell("read line; echo \"read=$?\"; cut -d' ' -f5 /proc/$$/stat; echo $$");
  REQUIRE(outcome.kind == CommandOutcome::Kind::kExited);
  std::istringstream lines(outcome.out);
  std::string read_status, pgid, pid;
  std::getline(lines, read_status);
  std::getline(lines, pgid);
  std::getline(lines, pid);
  CHECK(read_status == "read=1");  // EOF at once
  CHECK(pgid == pid);
}

TEST_CASE("command runner: death by signal", "[command_runner]") {
  const CommandOutcome outcome = Shell("kill -TERM $$");
  CHECK(outcome.kind == CommandOutcome::Kind::kSignaled);
  CHECK(outcome.code == SIGTERM);
}

TEST_CASE("command runner: a program that does not exist", "[command_runner]") {
  TempDir dir;
  const CommandOutcome outcome = LocalCommandRunner().Run({dir.path() + "/nope"}, {}, 10);
  CHECK(outcome.kind == CommandOutcome::Kind::kSpawnFailed);
  CHECK(outcome.error == "No such file or directory");
}

TEST_CASE("command runner: a hang is killed at the deadline, with its whole group",
          "[command_runner]") {
  // The test becomes a subreaper, so the background helper (orphaned when
  // the shell dies) is reparented to it and can be waited for: no polling.
  REQUIRE(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  TempDir dir;
  const std::string pid_file = dir.path() + "/helper.pid";
  const CommandOutcome outcome =
      Shell("sleep 300 & echo $! > '" + pid_file + "'; exec sleep 300", {}, 0.3);
  CHECK(outcome.kind == CommandOutcome::Kind::kTimedOut);
  std::ifstream in(pid_file);
  pid_t helper = 0;
  in >> helper;
  REQUIRE(helper > 0);
  int status = 0;
  REQUIRE(waitpid(helper, &status, 0) == helper);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  prctl(PR_SET_CHILD_SUBREAPER, 0);
}

TEST_CASE("command runner: closing both streams does not escape the deadline", "[command_runner]") {
  const CommandOutcome outcome = Shell("exec >/dev/null 2>&1; exec sleep 300", {}, 0.3);
  CHECK(outcome.kind == CommandOutcome::Kind::kTimedOut);
}

}  // namespace
}  // namespace gculaunch
