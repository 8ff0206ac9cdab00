#include "launcher/frontend/job_file.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "launcher/frontend/cli.h"
#include "launcher/frontend/dry_run.h"
#include "launcher/frontend/launch_spec.h"
#include "tests/support/frontend_fakes.h"

namespace gculaunch {
namespace {

using testing::FakeDeviceProbe;
using testing::FakeFileAccess;

std::string ReadSource(const std::string& relative) {
  std::ifstream in(std::string(GCULAUNCH_SOURCE_DIR) + "/" + relative);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct Fixture {
  FakeDeviceProbe probe;
  FakeFileAccess files;
  EnvMap env{{"PATH", "/usr/bin:/bin"}};

  Fixture() { files.executables["python3"] = "/usr/bin/python3"; }

  void Job(const std::string& text, const std::string& path = "job.yaml") {
    files.files[path] = text;
  }

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
  std::string ErrorOf(const std::vector<std::string>& args) {
    auto spec = TrySpec(args);
    REQUIRE_FALSE(spec.ok());
    return spec.error().Format();
  }
};

bool HasNote(const LaunchSpec& spec, const std::string& note) {
  return std::find(spec.notes.begin(), spec.notes.end(), note) != spec.notes.end();
}

TEST_CASE("job file: what a shell script held, as keys", "[job_file]") {
  Fixture f;
  f.probe.AddCards("enflame-gcu", "gcu", {0, 1, 2, 3, 4, 5, 6, 7});
  f.Job(R"(script: tools/train.py
args: ["{config}", --launcher, pytorch]
configs:
  8: configs/a_8card.py
  16: configs/a_16card.py
device: gcu
nproc_per_node: 8
standalone: true
env:
  ECCL_DEBUG: INFO
  OMP_NUM_THREADS: "5"
log_dir: logs
max-restarts: 3
)");
  const LaunchSpec spec = f.Spec({"--job", "job.yaml"});
  CHECK(spec.argv == std::vector<std::string>{"/usr/bin/python3", "-u", "tools/train.py",
                                              "configs/a_8card.py", "--launcher", "pytorch"});
  CHECK(spec.profile.name == "enflame-gcu");
  CHECK(spec.nproc_per_node == 8);
  CHECK(spec.standalone);
  CHECK(spec.log_dir == "logs");
  CHECK(spec.max_restarts == 3);
  CHECK(spec.extra_env == std::vector<std::pair<std::string, std::string>>{
                              {"ECCL_DEBUG", "INFO"}, {"OMP_NUM_THREADS", "5"}});
  CHECK(HasNote(spec, "config configs/a_8card.py for 8 cards (job.yaml:3)"));
}

TEST_CASE("job file: the command line and PET_* override the file", "[job_file]") {
  Fixture f;
  f.Job(R"(script: train.py
args: ["{config}"]
configs: {2: two.py, 4: four.py, 8: eight.py}
device: cpu
nproc_per_node: 8
max_restarts: 3
env: {A: from-file, B: from-file}
)");
  f.env.Set("PET_MAX_RESTARTS", "1");
  const LaunchSpec spec = f.Spec({"--job", "job.yaml", "--nproc-per-node", "4", "--env", "B=cli"});
  CHECK(spec.nproc_per_node == 4);
  CHECK(spec.max_restarts == 1);
  CHECK(spec.argv.back() == "four.py");
  // The file's env comes first, so --env wins for the same name.
  CHECK(spec.extra_env == std::vector<std::pair<std::string, std::string>>{
                              {"A", "from-file"}, {"B", "from-file"}, {"B", "cli"}});
  const EnvMap rank = BuildRankEnv(spec, f.env, 0, 0, DryRunRuntime(spec));
  CHECK(rank.GetOr("B", "") == "cli");
  CHECK(rank.GetOr("A", "") == "from-file");
  CHECK(HasNote(spec, "job.yaml:5: nproc_per_node 8 is overridden by --nproc-per-node"));
  CHECK(HasNote(spec, "job.yaml:6: max_restarts 3 is overridden by PET_MAX_RESTARTS"));
}

TEST_CASE("job file: a SCRIPT on the command line replaces the file's script and args",
          "[job_file]") {
  Fixture f;
  f.Job("script: train.py\nargs: [\"{config}\"]\nconfigs: {1: one.py}\ndevice: cpu\n");
  const LaunchSpec spec = f.Spec({"--job", "job.yaml", "other.py", "--cfg", "{config}"});
  CHECK(spec.argv ==
        std::vector<std::string>{"/usr/bin/python3", "-u", "other.py", "--cfg", "one.py"});
  CHECK(HasNote(spec,
                "SCRIPT other.py from the command line replaces the script and args of job.yaml"));
}

TEST_CASE("job file: config selection by total card count", "[job_file]") {
  Fixture f;
  f.Job(R"(script: train.py
args: [--config, "cfg={config}", "{config}"]
configs:
  8: eight.py
  16: sixteen.py
device: cpu
)");
  SECTION("two nodes of eight") {
    const LaunchSpec spec = f.Spec({"--job", "job.yaml", "--nnodes", "2", "--node-rank", "1",
                                    "--master-addr", "n0", "--nproc-per-node", "8"});
    CHECK(std::vector<std::string>(spec.argv.end() - 3, spec.argv.end()) ==
          std::vector<std::string>{"--config", "cfg=sixteen.py", "sixteen.py"});
  }
  SECTION("no entry for the count: the error lists the counts there are") {
    CHECK(f.ErrorOf({"--job", "job.yaml", "--nproc-per-node", "4"}) ==
          "gculaunch: job.yaml:3: configs has no entry for 4 cards (1 node x 4 ranks); it has "
          "8, 16 (fix: add '4: <config file>' under configs:, or change --nnodes / "
          "--nproc-per-node)");
  }
  SECTION("{config} without configs") {
    f.Job("script: train.py\nargs: [\"{config}\"]\n");
    CHECK(f.ErrorOf({"--job", "job.yaml"}) ==
          "gculaunch: job.yaml:2: 'args' uses {config} but the file has no configs: (fix: add "
          "configs: with one entry per total card count, e.g. configs: {8: a.py})");
  }
  SECTION("{config} on a command line without a job file stays as it is") {
    const LaunchSpec spec = f.Spec({"--device", "cpu", "train.py", "{config}"});
    CHECK(spec.argv.back() == "{config}");
  }
}

TEST_CASE("job file: the dry run shows the merged result", "[job_file]") {
  Fixture f;
  f.Job(
      "script: train.py\nargs: [\"{config}\"]\nconfigs: {2: two.py}\ndevice: cpu\n"
      "nproc_per_node: 2\nenv: {ECCL_DEBUG: INFO}\n");
  const LaunchSpec spec = f.Spec({"--job", "job.yaml", "--dry-run"});
  const std::string text = RenderDryRun(spec, f.env);
  CHECK(text.find("  argv: /usr/bin/python3 -u train.py two.py\n") != std::string::npos);
  CHECK(text.find("  - config two.py for 2 cards (job.yaml:3)\n") != std::string::npos);
  CHECK(text.find("    ECCL_DEBUG=INFO\n") != std::string::npos);
}

TEST_CASE("job file: unknown keys and type errors name file, line and key", "[job_file]") {
  Fixture f;
  auto error = [&](const std::string& yaml) {
    f.Job(yaml);
    return f.ErrorOf({"--job", "job.yaml"});
  };
  CHECK(error("script: t.py\nnprocs_per_node: 8\n") ==
        "gculaunch: job.yaml:2: unknown key 'nprocs_per_node' (fix: did you mean nproc_per_node? "
        "keys are script, args, env, configs and gculaunch's flags (nproc_per_node, device, "
        "log_dir, ...; see gculaunch --help))");
  CHECK(error("script: t.py\nfoo: 1\n") ==
        "gculaunch: job.yaml:2: unknown key 'foo' (fix: keys are script, args, env, configs and "
        "gculaunch's flags (nproc_per_node, device, log_dir, ...; see gculaunch --help))");
  CHECK(error("script: t.py\nnproc_per_node: eight\n") ==
        "gculaunch: job.yaml:2: nproc_per_node 'eight': expected a positive number, auto, gpu or "
        "cpu (fix: e.g. nproc_per_node: 8)");
  CHECK(error("script: t.py\nnproc_per_node: [8]\n") ==
        "gculaunch: job.yaml:2: 'nproc_per_node' must be a single value, not a list (fix: write "
        "it as nproc_per_node: VALUE (lists as text, e.g. 0,1))");
  CHECK(error("script: t.py\ndevice:\n") ==
        "gculaunch: job.yaml:2: 'device' has no value (fix: give one, or remove the key)");
  CHECK(error("script: t.py\nstandalone: maybe\n") ==
        "gculaunch: job.yaml:2: standalone 'maybe': expected true or false (fix: e.g. "
        "standalone: true)");
  CHECK(error("script: t.py\nargs: --amp\n") ==
        "gculaunch: job.yaml:2: 'args' must be a list (fix: write it as args: [\"{config}\", "
        "--amp])");
  CHECK(error("script: t.py\nenv: [A=1]\n") ==
        "gculaunch: job.yaml:2: 'env' must be a mapping of variable names to values (fix: write "
        "it as env: {ECCL_DEBUG: INFO})");
  CHECK(error("script: t.py\nenv:\n  1BAD: x\n") ==
        "gculaunch: job.yaml:3: env: '1BAD' is not a valid variable name (fix: use letters, "
        "digits and '_', not starting with a digit)");
  CHECK(error("script: t.py\nenv:\n  RANK: '3'\n") ==
        "gculaunch: job.yaml:2: env RANK=3: RANK is set by gculaunch for each rank (fix: use "
        "--nnodes, --node-rank and --nproc-per-node)");
  CHECK(error("script: t.py\nconfigs:\n  eight: a.py\n") ==
        "gculaunch: job.yaml:3: configs: 'eight' is not a card count (fix: use the total number "
        "of cards (ranks) of the job, e.g. 8: or 16:)");
  CHECK(error("script: t.py\ndevice: gcu\ndevice: cpu\n") ==
        "gculaunch: job.yaml:3: key 'device' is given twice (also on line 2) (fix: keep one of "
        "them)");
  CHECK(error("script: t.py\nlog-dir: a\nlog_dir: b\n") ==
        "gculaunch: job.yaml:3: key 'log_dir' is given twice (also on line 2) (fix: keep one of "
        "them)");
  CHECK(error("script: t.py\njob: other.yaml\n") ==
        "gculaunch: job.yaml:2: key 'job': a job file cannot name another job file (fix: merge "
        "the two files)");
  CHECK(error("- a\n- b\n") ==
        "gculaunch: job.yaml:1: a job file must be a YAML mapping of keys to values (fix: start "
        "with keys such as script: and nproc_per_node:)");
  CHECK(error("script: [unclosed\n") ==
        "gculaunch: job.yaml:2: end of sequence flow not found (fix: fix the YAML syntax)");
  CHECK(error("device: cpu\n") ==
        "gculaunch: no SCRIPT given: neither the command line nor job.yaml names one (fix: add "
        "script: to the job file, or give SCRIPT after the flags)");
  CHECK(f.ErrorOf({"--job", "missing.yaml"}) ==
        "gculaunch: --job: cannot read 'missing.yaml': No such file or directory (fix: give the "
        "path of an existing job file)");
}

TEST_CASE("job file: one YAML document, no explicit tags", "[job_file]") {
  Fixture f;
  auto error = [&](const std::string& yaml) {
    f.Job(yaml);
    return f.ErrorOf({"--job", "job.yaml"});
  };
  const std::string second =
      "a second YAML document ('---'); a job file holds one (fix: remove the '---' line and what "
      "follows, or move it into a job file of its own)";
  CHECK(error("script: x.py\n---\nscript: y.py\n") == "gculaunch: job.yaml:3: " + second);
  CHECK(error("script: x.py\n---\n") == "gculaunch: job.yaml:3: " + second);
  CHECK(error("log_dir: !!binary aGVsbG8=\nscript: x.py\n") ==
        "gculaunch: job.yaml:1: the YAML tag '!!binary' is not supported in a job file (fix: drop "
        "the tag and write the value as plain text)");
  CHECK(error("script: x.py\nargs: [--a, !!str 5]\n")
            .find("job.yaml:2: the YAML tag '!!str' is not supported") != std::string::npos);
  CHECK(error("script: x.py\nenv: {A: !custom b}\n")
            .find("job.yaml:2: the YAML tag '!custom' is not supported") != std::string::npos);
  CHECK(error("script: x.py\nconfigs: !!map {8: a.py}\n").find("'!!map' is not supported") !=
        std::string::npos);
  // A leading '---' starts the one document; quoted and plain values carry no tag.
  f.Job("---\nscript: x.py\nlog_dir: \"logs\"\nenv: {A: 'b'}\n");
  REQUIRE(f.TrySpec({"--job", "job.yaml"}).ok());
}

TEST_CASE("job file: SCRIPT may be left out with --job or PET_JOB", "[job_file]") {
  Fixture f;
  auto cli = ParseCli({"--job", "j.yaml"}, f.env);
  REQUIRE(cli.ok());
  CHECK(cli->options.job == "j.yaml");
  CHECK(cli->options.script.empty());
  f.env.Set("PET_JOB", "j.yaml");
  auto from_pet = ParseCli({"--nproc-per-node", "2"}, f.env);
  REQUIRE(from_pet.ok());
  CHECK(from_pet->options.Source("job") == "PET_JOB");
  f.env.Erase("PET_JOB");
  auto none = ParseCli({"--nproc-per-node", "2"}, f.env);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().what == "no SCRIPT given");
}

TEST_CASE("job file: the shipped examples parse and select their configs", "[job_file]") {
  Fixture f;
  f.probe.AddCards("enflame-gcu", "gcu", {0, 1, 2, 3, 4, 5, 6, 7});
  for (const char* name : {"t20-8card.yaml", "t20-2node-16card.yaml"}) {
    const std::string path = std::string("configs/examples/") + name;
    f.files.files[path] = ReadSource(path);
  }
  const LaunchSpec one = f.Spec({"--job", "configs/examples/t20-8card.yaml", "--dry-run"});
  CHECK(one.nproc_per_node == 8);
  CHECK(one.profile.name == "enflame-gcu");
  CHECK(one.argv[3] == "configs/train_t20_gcu_8card.py");
  CHECK(one.python_shim);
  CHECK(one.cpu_affinity == CpuAffinity::kNuma);
  const LaunchSpec four =
      f.Spec({"--job", "configs/examples/t20-8card.yaml", "--nproc-per-node", "4"});
  CHECK(four.argv[3] == "configs/train_t20_gcu_4card.py");

  const LaunchSpec node1 =
      f.Spec({"--job", "configs/examples/t20-2node-16card.yaml", "--node-rank", "1", "--dry-run"});
  CHECK(node1.world_size == 16);
  CHECK(node1.rank_offset == 8);
  CHECK(node1.master_addr == "t20-node0");
  CHECK(node1.argv[3] == "configs/train_t20_gcu_16card.py");
  CHECK(node1.grace_period_s == 60);
  const LaunchSpec single =
      f.Spec({"--job", "configs/examples/t20-2node-16card.yaml", "--nnodes", "1", "--dry-run"});
  CHECK(single.argv[3] == "configs/train_t20_gcu_8card.py");
}

}  // namespace
}  // namespace gculaunch
