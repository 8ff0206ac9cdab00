#include "launcher/frontend/stack_hook.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>

#include "launcher/frontend/cli.h"
#include "launcher/frontend/dry_run.h"
#include "launcher/frontend/python_shim.h"
#include "tests/support/frontend_fakes.h"
#include "tests/support/test_util.h"

namespace gculaunch {
namespace {

using testing::FakeDeviceProbe;
using testing::FakeFileAccess;
using testing::ReadFile;
using testing::TempDir;

struct Fixture {
  FakeDeviceProbe probe;
  FakeFileAccess files;
  EnvMap env{{"PATH", "/usr/bin:/bin"}};

  Fixture() { files.executables["python3"] = "/usr/bin/python3"; }

  Result<LaunchSpec> TrySpec(const std::vector<std::string>& args) {
    auto cli = ParseCli(args, env);
    if (!cli.ok()) return cli.error();
    return MakeLaunchSpec(cli->options, env, probe, files);
  }
  LaunchSpec Spec(const std::vector<std::string>& args) {
    auto spec = TrySpec(args);
    if (!spec.ok()) FAIL(spec.error().Format());
    return std::move(*spec);
  }
  EnvMap Rank(const LaunchSpec& spec, int local_rank = 0, int restart_count = 0) {
    LaunchChoices choices{"29500", "run1", "/scratch/gl-run", "4242"};
    return BuildRankEnv(spec, env, local_rank, restart_count, ResolveRankRuntime(spec, choices));
  }
};

}  // namespace

TEST_CASE(
    "stack hook: the embedded texts are launcher/frontend/python/stack_hook/sitecustomize.py and "
    "the shared _gculaunch_site.py",
    "[stack_hook]") {
  const std::string dir = std::string(GCULAUNCH_SOURCE_DIR) + "/launcher/frontend/python/";
  REQUIRE(StackHookFiles().size() == 2);
  CHECK(StackHookFiles()[0].first == "_gculaunch_site.py");
  CHECK(std::string(StackHookFiles()[0].second) == ReadFile(dir + "_gculaunch_site.py"));
  CHECK(StackHookFiles()[1].first == "sitecustomize.py");
  CHECK(std::string(StackHookFiles()[1].second) == ReadFile(dir + "stack_hook/sitecustomize.py"));
}

TEST_CASE("stack hook: a real-time signal, never SIGUSR1 or SIGUSR2", "[stack_hook]") {
  const int sig = StackDumpSignal();
  CHECK(sig >= SIGRTMIN);
  CHECK(sig <= SIGRTMAX);
  CHECK(sig != SIGUSR1);
  CHECK(sig != SIGUSR2);
}

TEST_CASE("stack hook: the ranks' variables", "[stack_hook]") {
  Fixture f;
  SECTION("--stack-dumps: the hook first on PYTHONPATH, a file per rank and attempt") {
    f.env.Set("PYTHONPATH", "/opt/project");
    const LaunchSpec spec =
        f.Spec({"--device", "cpu", "--nproc-per-node", "2", "--stack-dumps", "train.py"});
    CHECK(spec.stack_dumps);
    CHECK(spec.stack_dump_signal == StackDumpSignal());
    const EnvMap rank = f.Rank(spec, 1, 2);
    CHECK(rank.GetOr("PYTHONPATH", "") == "/scratch/gl-run/stack-hook:/opt/project");
    CHECK(rank.GetOr("GCULAUNCH_STACKS_PARENT", "") == "4242");
    CHECK(rank.GetOr("GCULAUNCH_STACKS_DIR", "") == "/scratch/gl-run/stack-hook");
    CHECK(rank.GetOr("GCULAUNCH_STACKS_SIGNAL", "") == std::to_string(StackDumpSignal()));
    CHECK(rank.GetOr("GCULAUNCH_STACKS_FILE", "") == "/scratch/gl-run/attempt_2/1/stacks.txt");
  }
  SECTION("with --python-shim: the hook first, then the shim, then the user's path") {
    f.env.Set("PYTHONPATH", "/opt/project");
    const LaunchSpec spec =
        f.Spec({"--device", "cpu", "--stack-dumps", "--python-shim", "train.py"});
    CHECK(f.Rank(spec).GetOr("PYTHONPATH", "") ==
          "/scratch/gl-run/stack-hook:/scratch/gl-run/python-shim:/opt/project");
  }
  SECTION("without --stack-dumps nothing of it, even when inherited") {
    f.env.Set("GCULAUNCH_STACKS_PARENT", "1");
    f.env.Set("GCULAUNCH_STACKS_FILE", "/old");
    f.env.Set("PYTHONPATH", "/opt/project");
    const LaunchSpec spec = f.Spec({"--device", "cpu", "train.py"});
    CHECK_FALSE(spec.stack_dumps);
    const EnvMap rank = f.Rank(spec);
    for (const std::string& var : StackHookVariables()) CHECK_FALSE(rank.Has(var));
    CHECK(rank.GetOr("PYTHONPATH", "") == "/opt/project");
  }
}

TEST_CASE("stack hook: the dry run shows it", "[stack_hook]") {
  Fixture f;
  const LaunchSpec spec = f.Spec(
      {"--device", "cpu", "--nproc-per-node", "2", "--stack-dumps", "--dry-run", "train.py"});
  const std::string text = RenderDryRun(spec, f.env);
  CHECK(text.find("    PYTHONPATH='<temporary directory created at launch>/stack-hook'\n") !=
        std::string::npos);
  CHECK(text.find("    GCULAUNCH_STACKS_SIGNAL=" + std::to_string(StackDumpSignal()) + "\n") !=
        std::string::npos);
  CHECK(text.find("  - --stack-dumps: each rank loads gculaunch's stack-dump hook (first on "
                  "PYTHONPATH), which writes every thread's Python stack to "
                  "GCULAUNCH_STACKS_FILE on signal " +
                  std::to_string(StackDumpSignal()) +
                  " (SIGRTMIN+10); `gculaunch stacks` "
                  "asks for it; it acts only in the ranks themselves\n") != std::string::npos);
}

TEST_CASE("stack hook: flag errors and PET_STACK_DUMPS", "[stack_hook]") {
  Fixture f;
  auto spec = f.TrySpec(
      {"--device", "cpu", "--stack-dumps", "--env", "GCULAUNCH_STACKS_FILE=/x", "train.py"});
  REQUIRE_FALSE(spec.ok());
  CHECK(spec.error().Format() ==
        "gculaunch: --env GCULAUNCH_STACKS_FILE=/x: GCULAUNCH_STACKS_FILE is set by gculaunch "
        "for each rank (fix: it belongs to --stack-dumps)");
  f.env.Set("PET_STACK_DUMPS", "1");
  CHECK(f.Spec({"--device", "cpu", "train.py"}).stack_dumps);
}

}  // namespace gculaunch

namespace gculaunch {

TEST_CASE("hang timeout: the spec, the heartbeat file and the flags' rules", "[stack_hook]") {
  Fixture f;
  SECTION("--hang-timeout turns on the hook and gives every rank a heartbeat file") {
    const LaunchSpec spec =
        f.Spec({"--device", "cpu", "--nproc-per-node", "2", "--hang-timeout", "3s", "train.py"});
    CHECK(spec.stack_dumps);
    CHECK(spec.hang_timeout_s == 3.0);
    CHECK(spec.hang_grace_s == 600.0);
    CHECK(spec.on_hang == OnHang::kStop);
    const EnvMap rank = f.Rank(spec, 1, 1);
    CHECK(rank.GetOr("GCULAUNCH_HEARTBEAT_FILE", "") == "/scratch/gl-run/attempt_1/1/heartbeat");
    CHECK(rank.Has("GCULAUNCH_STACKS_FILE"));
    CHECK(std::find(spec.notes.begin(), spec.notes.end(),
                    "--hang-timeout: 3 s without progress from any rank (output, or a touch of "
                    "GCULAUNCH_HEARTBEAT_FILE) after the first, or 600 s before it, is a hang: "
                    "every rank's stacks are shown, then gculaunch will stop the ranks (exit "
                    "6)") != spec.notes.end());
  }
  SECTION("the grace is never shorter than the timeout; --on-hang") {
    const LaunchSpec spec = f.Spec({"--device", "cpu", "--hang-timeout", "20m", "--hang-grace",
                                    "1m", "--on-hang", "restart", "train.py"});
    CHECK(spec.hang_grace_s == 1200.0);
    CHECK(spec.on_hang == OnHang::kRestart);
  }
  SECTION("several nodes: node 0 decides for the job, every node reports") {
    const LaunchSpec spec =
        f.Spec({"--device", "cpu", "--nnodes", "2", "--node-rank", "1", "--master-addr",
                "127.0.0.1", "--master-port", "29500", "--hang-timeout", "3s", "train.py"});
    CHECK(spec.hang_timeout_s == 3.0);
    CHECK(spec.stack_dumps);
    CHECK(std::find(spec.notes.begin(), spec.notes.end(),
                    "--hang-timeout on several nodes: node 0 decides for the whole job from "
                    "every node's progress reports and gathers every node's stacks; give every "
                    "node the same --hang-timeout") != spec.notes.end());
  }
  SECTION("an elastic node count: node 0 decides over each epoch's members") {
    const LaunchSpec spec = f.Spec({"--device", "cpu", "--nnodes", "1:3", "--rdzv-endpoint",
                                    "127.0.0.1:29500", "--hang-timeout", "3s", "train.py"});
    CHECK(spec.hang_timeout_s == 3.0);
    CHECK(spec.stack_dumps);
  }
  SECTION("--stack-dumps alone: no heartbeat file, even inherited") {
    f.env.Set("GCULAUNCH_HEARTBEAT_FILE", "/old");
    const LaunchSpec spec = f.Spec({"--device", "cpu", "--stack-dumps", "train.py"});
    CHECK(spec.hang_timeout_s == 0);
    CHECK_FALSE(f.Rank(spec).Has("GCULAUNCH_HEARTBEAT_FILE"));
  }
  SECTION("errors") {
    auto error = [&](const std::vector<std::string>& args) {
      auto spec = f.TrySpec(args);
      REQUIRE_FALSE(spec.ok());
      return spec.error().Format();
    };
    CHECK(error({"--device", "cpu", "--on-hang", "report", "train.py"}) ==
          "gculaunch: --on-hang only applies with --hang-timeout (fix: add --hang-timeout "
          "DURATION, or drop --on-hang)");
    CHECK(error({"--device", "cpu", "--hang-grace", "5m", "train.py"}) ==
          "gculaunch: --hang-grace only applies with --hang-timeout (fix: add --hang-timeout "
          "DURATION, or drop --hang-grace)");
    CHECK(error({"--device", "cpu", "--hang-timeout", "3s", "--env", "GCULAUNCH_HEARTBEAT_FILE=/x",
                 "train.py"}) ==
          "gculaunch: --env GCULAUNCH_HEARTBEAT_FILE=/x: GCULAUNCH_HEARTBEAT_FILE is set by "
          "gculaunch for each rank (fix: it belongs to --hang-timeout)");
  }
}

}  // namespace gculaunch
