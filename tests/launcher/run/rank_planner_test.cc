#include "launcher/run/rank_planner.h"

#include <catch2/catch.hpp>
#include <filesystem>

#include "tests/support/test_util.h"

namespace gculaunch {
namespace {

LaunchSpec Spec(const std::string& log_dir) {
  LaunchSpec spec;
  spec.nproc_per_node = 3;
  spec.world_size = 3;
  spec.executable = "/bin/true";
  spec.argv = {"/bin/true", "a${local_rank}"};
  spec.log_dir = log_dir;
  spec.store_mode = StoreMode::kRank0;
  return spec;
}

std::string EnvValue(const std::vector<std::string>& env, const std::string& key) {
  for (const std::string& kv : env) {
    if (kv.rfind(key + "=", 0) == 0) return kv.substr(key.size() + 1);
  }
  return "<unset>";
}

}  // namespace

TEST_CASE("RankPlanner: --duplicate-*-filters name the attempt's files and the feeding ranks",
          "[job]") {
  testing::TempDir dir;
  LaunchSpec spec = Spec(dir.path());
  spec.tee = StdStreams{3, {{0, 3}, {1, 1}, {2, 3}}};
  spec.console_local_ranks = {1, 2};
  spec.duplicate_stdout_filters = {"loss"};
  spec.duplicate_stderr_filters = {"WARN"};
  RankRuntime runtime{"29511", "run1", dir.File("run1")};
  auto logs = sys::HeldDir::Open(dir.File("logs"));
  REQUIRE(logs.ok());
  RankPlanner planner(spec, EnvMap{}, runtime, false, *logs);
  auto plan = planner.PlanAttempt(2);
  REQUIRE(plan.ok());
  REQUIRE(plan->size() == 3);
  for (const RankLaunch& r : *plan) {
    INFO("local rank " << r.local_rank);
    // One file per attempt, named for every rank (the worker group opens it once).
    CHECK(r.filtered_stdout_log == "attempt_2/filtered_stdout.log");
    CHECK(r.filtered_stderr_log == "attempt_2/filtered_stderr.log");
  }
  // Local rank 0 is not shown on the console; local rank 1 tees only stdout.
  CHECK((*plan)[0].stdout_filters.empty());
  CHECK((*plan)[0].stderr_filters.empty());
  CHECK((*plan)[1].stdout_filters == std::vector<std::string>{"loss"});
  CHECK((*plan)[1].stderr_filters.empty());
  CHECK((*plan)[2].stdout_filters == std::vector<std::string>{"loss"});
  CHECK((*plan)[2].stderr_filters == std::vector<std::string>{"WARN"});
  // Without filters there is no file.
  spec.duplicate_stderr_filters.clear();
  RankPlanner without(spec, EnvMap{}, runtime, false, *logs);
  auto plain = without.PlanAttempt(0);
  REQUIRE(plain.ok());
  CHECK((*plain)[2].filtered_stderr_log.empty());
  CHECK((*plain)[2].stderr_filters.empty());
}

TEST_CASE("RankPlanner: attempt directories, stale error files, env and argv", "[job]") {
  testing::TempDir dir;
  const LaunchSpec spec = Spec(dir.path());
  const EnvMap base{{"PATH", "/usr/bin"}};
  RankRuntime runtime{"29511", "run1", dir.File("run1")};
  // A stale error file from an earlier run with the same log dir and run id.
  const std::string stale = dir.File("run1/attempt_1/2/error.json");
  std::filesystem::create_directories(std::filesystem::path(stale).parent_path());
  testing::WriteFile(stale, "{\"message\": \"old\"}");

  auto logs = sys::HeldDir::Open(dir.File("logs"));
  REQUIRE(logs.ok());
  RankPlanner planner(spec, base, runtime, false, *logs);
  auto plan = planner.PlanAttempt(1);
  REQUIRE(plan.ok());
  REQUIRE(plan->size() == 3);
  CHECK_FALSE(std::filesystem::exists(stale));
  for (int lr = 0; lr < 3; ++lr) {
    const RankLaunch& r = (*plan)[lr];
    const std::string rank_dir = dir.File("run1/attempt_1/" + std::to_string(lr));
    CHECK(std::filesystem::is_directory(rank_dir));
    CHECK(r.error_file == rank_dir + "/error.json");
    // The log files are in the log directory, reached through its descriptor.
    const std::string rel = "attempt_1/" + std::to_string(lr);
    CHECK(std::filesystem::is_directory(dir.File("logs/" + rel)));
    REQUIRE(r.log_dir);
    CHECK(r.log_dir->PathOf() == dir.File("logs"));
    CHECK(r.stdout_log == rel + "/stdout.log");
    CHECK(r.stderr_log == rel + "/stderr.log");
    CHECK(r.error_file_copy == rel + "/error.json");
    CHECK(r.argv == std::vector<std::string>{"/bin/true", "a" + std::to_string(lr)});
    CHECK(r.program == "/bin/true");
    CHECK(EnvValue(r.env, "TORCHELASTIC_RESTART_COUNT") == "1");
    CHECK(EnvValue(r.env, "TORCHELASTIC_ERROR_FILE") == r.error_file);
    CHECK(EnvValue(r.env, "MASTER_PORT") == "29511");
    CHECK(EnvValue(r.env, "LOCAL_RANK") == std::to_string(lr));
    CHECK_FALSE(r.inherit_stdin);
    CHECK(r.stdout_to_console);
    CHECK(r.stderr_to_console);
  }
}

TEST_CASE("RankPlanner: console routing, filter, redirects, stdin", "[job]") {
  testing::TempDir dir;
  LaunchSpec spec = Spec("");
  spec.console_local_ranks = {0, 2};
  spec.redirects.per_rank = {{2, StdStreams::kStdout}};
  spec.stdin_mode = StdinMode::kRank0;
  const EnvMap base;
  RankPlanner planner(spec, base, RankRuntime{"1", "r", dir.File("scratch")}, true,
                      sys::HeldDir::Open(dir.File("logs")).value());
  auto plan = planner.PlanAttempt(0);
  REQUIRE(plan.ok());
  const auto& r = *plan;
  CHECK(r[0].stdout_to_console);
  CHECK(r[0].stderr_to_console);
  CHECK_FALSE(r[1].stdout_to_console);  // filtered out
  CHECK_FALSE(r[1].stderr_to_console);
  CHECK_FALSE(r[2].stdout_to_console);  // redirected to its file
  CHECK(r[2].stderr_to_console);
  // --redirects without --log-dir: torchrun's rule, only the redirected streams are filed, so
  // ranks it maps to 0 keep no copy of their output.
  CHECK(r[0].stdout_log.empty());
  CHECK(r[0].stderr_log.empty());
  CHECK(r[1].stdout_log.empty());
  CHECK(r[2].stdout_log == "attempt_0/2/stdout.log");
  CHECK(r[2].stderr_log.empty());
  CHECK(r[0].inherit_stdin);
  CHECK(r[0].take_terminal);
  CHECK_FALSE(r[1].inherit_stdin);
}

TEST_CASE("RankPlanner: torchrun's --tee rule, a stream is shown unless redirected and not teed",
          "[job]") {
  testing::TempDir dir;
  const EnvMap base;
  struct Case {
    std::string redirects, tee;
    bool out, err;  // on the console
  };
  for (const Case& c : std::vector<Case>{{"3", "3", true, true},
                                         {"3", "1", true, false},
                                         {"3", "2", false, true},
                                         {"3", "0", false, false},
                                         {"0", "3", true, true},
                                         {"1", "0", false, true},
                                         {"2", "1", true, false}}) {
    LaunchSpec spec = Spec("");
    spec.redirects.all = std::stoi(c.redirects);
    spec.tee.all = std::stoi(c.tee);
    RankPlanner planner(spec, base, RankRuntime{"1", "r", dir.File("scratch")}, false,
                        sys::HeldDir::Open(dir.File("logs")).value());
    auto plan = planner.PlanAttempt(0);
    REQUIRE(plan.ok());
    INFO("-r " << c.redirects << " -t " << c.tee);
    CHECK((*plan)[0].stdout_to_console == c.out);
    CHECK((*plan)[0].stderr_to_console == c.err);
    CHECK_FALSE((*plan)[0].stdout_log.empty());  // every case redirects or tees stdout
    const bool err_filed = ((spec.redirects.all | spec.tee.all) & StdStreams::kStderr) != 0;
    CHECK((*plan)[0].stderr_log.empty() == !err_filed);
  }
  // Per local rank: "0:1,1:2" teed over redirects 3.
  LaunchSpec spec = Spec("");
  spec.redirects.all = 3;
  spec.tee.per_rank = {{0, StdStreams::kStdout}, {1, StdStreams::kStderr}};
  RankPlanner planner(spec, base, RankRuntime{"1", "r", dir.File("scratch2")}, false,
                      sys::HeldDir::Open(dir.File("logs2")).value());
  auto plan = planner.PlanAttempt(0);
  REQUIRE(plan.ok());
  CHECK((*plan)[0].stdout_to_console);
  CHECK_FALSE((*plan)[0].stderr_to_console);
  CHECK_FALSE((*plan)[1].stdout_to_console);
  CHECK((*plan)[1].stderr_to_console);
  CHECK_FALSE((*plan)[2].stdout_to_console);
  CHECK_FALSE((*plan)[2].stderr_to_console);
}

TEST_CASE("RankPlanner: a directory that cannot be created is an error", "[job]") {
  testing::TempDir dir;
  testing::WriteFile(dir.File("file"), "x");
  LaunchSpec spec = Spec("");
  const EnvMap base;
  RankPlanner planner(spec, base, RankRuntime{"1", "r", dir.File("file/below")}, false);
  auto plan = planner.PlanAttempt(0);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.error().what.find("cannot create") == 0);
}

TEST_CASE("ScriptOf finds the script of a Python rank", "[job]") {
  LaunchSpec spec;
  spec.python = "/usr/bin/python3";
  CHECK(ScriptOf({"/usr/bin/python3", "-u", "train.py", "x"}, spec) == "train.py");
  CHECK(ScriptOf({"/usr/bin/python3", "-u", "-m", "pkg.mod"}, spec).empty());
  CHECK(ScriptOf({"/usr/bin/python3"}, spec).empty());
  spec.python.clear();  // --no-python
  CHECK(ScriptOf({"./prog", "-u", "x"}, spec).empty());
}

TEST_CASE("NewRunId looks like a UUID and differs each time", "[job]") {
  const std::string a = NewRunId();
  const std::string b = NewRunId();
  CHECK(a.size() == 36);
  CHECK(a[8] == '-');
  CHECK(a[23] == '-');
  CHECK(a.find_first_not_of("0123456789abcdef-") == std::string::npos);
  CHECK(a != b);
}

}  // namespace gculaunch
