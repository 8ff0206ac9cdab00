#include "launcher/sys/command_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
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

TEST_CASE("command runner: a file that is not executable names the reason", "[command_runner]") {
  TempDir dir;
  const std::string script = dir.Write("probe.sh", "#!/bin/sh\necho hi\n");
  REQUIRE(chmod(script.c_str(), 0644) == 0);
  const CommandOutcome outcome = LocalCommandRunner().Run({script}, {}, 10);
  CHECK(outcome.kind == CommandOutcome::Kind::kSpawnFailed);
  CHECK(outcome.error == "Permission denied");
  CHECK(outcome.out.empty());
}

TEST_CASE("command runner: the child gets default signals, an empty mask and no stray descriptor",
          "[command_runner]") {
  // What this process ignores, blocks or left open without close-on-exec must not reach the
  // child (the spawner's child setup).
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction old_int {};
  REQUIRE(sigaction(SIGINT, &ignore, &old_int) == 0);
  sigset_t usr1, old_mask;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  REQUIRE(sigprocmask(SIG_BLOCK, &usr1, &old_mask) == 0);
  const int stray = open("/dev/null", O_RDONLY);  // deliberately not close-on-exec
  REQUIRE(stray > 2);

  // Builtins only: a grep forked by the shell would see the shell in its wait for grep, with
  // every signal blocked for that moment (dash), and fail now and then.
  const std::string fd = "/proc/$$/fd/" + std::to_string(stray);
  const CommandOutcome outcome = Shell(
      "while IFS= read -r line; do case $line in SigBlk:*|SigIgn:*) echo \"$line\";; esac; "
      "done < /proc/$$/status; if [ -e " +
      fd + " ]; then echo leaked; else echo closed; fi");

  close(stray);
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  sigaction(SIGINT, &old_int, nullptr);
  REQUIRE(outcome.kind == CommandOutcome::Kind::kExited);
  CHECK(outcome.out == "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\nclosed\n");
}

TEST_CASE("command runner: helpers left in the group are killed once the child exits",
          "[command_runner]") {
  // As below: the test is the subreaper of the orphaned helper and can wait for it.
  REQUIRE(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  TempDir dir;
  const std::string pid_file = dir.path() + "/helper.pid";
  const CommandOutcome outcome =
      Shell("sleep 300 >/dev/null 2>&1 & echo $! > '" + pid_file + "'; echo done; exit 4");
  CHECK(outcome.kind == CommandOutcome::Kind::kExited);
  CHECK(outcome.code == 4);
  CHECK(outcome.out == "done\n");
  CHECK(outcome.error.empty());
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

TEST_CASE("command runner: an ignored SIGCHLD does not lose the exit status, and stays ignored",
          "[command_runner]") {
  // With SIGCHLD ignored the kernel would reap the child itself; the runner undoes that
  // while it waits and puts the caller's disposition back.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction old_chld {};
  REQUIRE(sigaction(SIGCHLD, &ignore, &old_chld) == 0);
  const CommandOutcome outcome = Shell("exit 7");
  struct sigaction after {};
  REQUIRE(sigaction(SIGCHLD, nullptr, &after) == 0);
  sigaction(SIGCHLD, &old_chld, nullptr);
  CHECK(outcome.kind == CommandOutcome::Kind::kExited);
  CHECK(outcome.code == 7);
  CHECK(outcome.error.empty());
  CHECK(after.sa_handler == SIG_IGN);
}

TEST_CASE("command runner: output beyond the limit is dropped", "[command_runner]") {
  const CommandOutcome outcome = Shell("head -c 1100000 /dev/zero; head -c 1100000 /dev/zero >&2");
  REQUIRE(outcome.kind == CommandOutcome::Kind::kExited);
  CHECK(outcome.code == 0);
  CHECK(outcome.out.size() == CommandOutcome::kMaxOutput);
  CHECK(outcome.err.size() == CommandOutcome::kMaxOutput);
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
  CHECK(outcome.error.empty());
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

TEST_CASE("running command: started now, collected later", "[command_runner]") {
  auto running = RunningCommand::Start({"/bin/sh", "-c", "echo early"}, {}, 10);
  ::usleep(100 * 1000);
  const CommandOutcome outcome = running->Finish();
  CHECK(outcome.kind == CommandOutcome::Kind::kExited);
  CHECK(outcome.out == "early\n");
  // Abandoned: the destructor kills and reaps it.
  { auto abandoned = RunningCommand::Start({"/bin/sh", "-c", "sleep 30"}, {}, 60); }
}

}  // namespace
}  // namespace gculaunch
