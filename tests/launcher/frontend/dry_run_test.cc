#include "launcher/frontend/dry_run.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "launcher/frontend/cli.h"
#include "tests/support/frontend_fakes.h"

namespace gculaunch {
namespace {

using testing::FakeDeviceProbe;
using testing::FakeFileAccess;
using testing::TempDir;

struct Fixture {
  FakeDeviceProbe probe;
  FakeFileAccess files;
  EnvMap env{{"PATH", "/usr/bin:/bin"}, {"HOME", "/home/u"}, {"LANG", "C.UTF-8"}};

  Fixture() { files.executables["python3"] = "/usr/bin/python3"; }

  LaunchSpec Spec(const std::vector<std::string>& args) {
    auto cli = ParseCli(args, env);
    if (!cli.ok()) FAIL(cli.error().Format());
    auto spec = MakeLaunchSpec(cli->options, env, probe, files);
    if (!spec.ok()) FAIL(spec.error().Format());
    return std::move(*spec);
  }
};

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_CASE("dry run: JSON has exactly the documented shape and the ranks' values", "[dry_run]") {
  Fixture f;
  LaunchSpec spec = f.Spec({"--dry-run", "--format", "json", "--device", "gcu", "--nproc-per-node",
                            "2", "--nnodes", "2", "--node-rank", "1", "--master-addr", "node0",
                            "train.py", "--rank", "${local_rank}"});
  const std::string text = RenderDryRun(spec, f.env);
  const auto json = nlohmann::ordered_json::parse(text);

  std::vector<std::string> keys;
  for (const auto& item : json.items()) keys.push_back(item.key());
  CHECK(keys == std::vector<std::string>{"nnodes", "node_rank", "nproc_per_node", "world_size",
                                         "master_addr", "master_port", "torch", "notes", "ranks"});
  // MakeLaunchSpec does not look for torch (the launcher does): both names.
  CHECK(json["torch"]["version"].is_null());
  CHECK(json["torch"]["nccl_error_handling"] ==
        std::vector<std::string>{"NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING"});
  CHECK(json["nnodes"] == 2);
  CHECK(json["node_rank"] == 1);
  CHECK(json["nproc_per_node"] == 2);
  CHECK(json["world_size"] == 4);
  CHECK(json["master_addr"] == "node0");
  CHECK(json["master_port"] == 29500);
  // The layout line comes first, then the spec's notes.
  std::vector<std::string> notes = {
      "layout: 2 nodes x 2 ranks, node 1, master node0:29500 (from --nnodes 2, --node-rank 1, "
      "--master-addr)"};
  notes.insert(notes.end(), spec.notes.begin(), spec.notes.end());
  CHECK(json["notes"].get<std::vector<std::string>>() == notes);
  REQUIRE(json["ranks"].size() == 2);
  const RankRuntime runtime = DryRunRuntime(spec);
  for (int local_rank = 0; local_rank < 2; ++local_rank) {
    const auto& rank = json["ranks"][local_rank];
    std::vector<std::string> rank_keys;
    for (const auto& item : rank.items()) rank_keys.push_back(item.key());
    CHECK(rank_keys ==
          std::vector<std::string>{"local_rank", "rank", "argv", "console_prefix", "env"});
    CHECK(rank["console_prefix"] == "[rank" + std::to_string(2 + local_rank) + "]: ");
    CHECK(rank["local_rank"] == local_rank);
    CHECK(rank["rank"] == 2 + local_rank);
    CHECK(rank["argv"].get<std::vector<std::string>>() ==
          std::vector<std::string>{"/usr/bin/python3", "-u", "train.py", "--rank",
                                   std::to_string(local_rank)});
    const auto env = rank["env"].get<std::map<std::string, std::string>>();
    CHECK(env == f.env.ChangedIn(BuildRankEnv(spec, f.env, local_rank, 0, runtime)));
    CHECK(env.at("RANK") == std::to_string(2 + local_rank));
    CHECK(env.at("TOPS_VISIBLE_DEVICES") == "0,1");
    CHECK(env.at("GCULAUNCH_DEVICE") == std::to_string(local_rank));
    CHECK(env.at("ECCL_MAX_NCHANNELS") == "2");
    CHECK(env.count("PATH") == 0);  // unchanged variables are not listed
  }
}

TEST_CASE("dry run: values unknown before a launch are stated placeholders", "[dry_run]") {
  Fixture f;
  LaunchSpec spec = f.Spec({"--dry-run", "--standalone", "--nproc-per-node", "2", "x.py"});
  const auto json = nlohmann::json::parse(RenderDryRun(spec, f.env, DryRunFormat::kJson));
  CHECK(json["master_port"] == "<port chosen at launch>");
  const auto& env = json["ranks"][1]["env"];
  CHECK(env["MASTER_PORT"] == "<port chosen at launch>");
  CHECK(env["TORCHELASTIC_RUN_ID"] == "<run id generated at launch>");
  CHECK(env["TORCHELASTIC_ERROR_FILE"] ==
        "<temporary directory created at launch>/attempt_0/1/error.json");
}

TEST_CASE("dry run: --redirects without --log-dir states the kept torchelastic_ directory",
          "[dry_run]") {
  Fixture f;
  LaunchSpec spec = f.Spec({"--dry-run", "--standalone", "--run-id", "job6", "--redirects", "3",
                            "--nproc-per-node", "2", "x.py"});
  const auto json = nlohmann::json::parse(RenderDryRun(spec, f.env, DryRunFormat::kJson));
  CHECK(json["log_dir"] == "<TMPDIR>/torchelastic_<random>/job6_<random>");
  CHECK(Contains(RenderDryRun(spec, f.env, DryRunFormat::kTable),
                 "  logs:    <TMPDIR>/torchelastic_<random>/job6_<random>\n"));
  // The rank's own files are in gculaunch's private directory, not with the logs.
  CHECK(json["ranks"][1]["env"]["TORCHELASTIC_ERROR_FILE"] ==
        "<temporary directory created at launch>/attempt_0/1/error.json");
}

TEST_CASE("dry run: with --master-port, --run-id and --log-dir only the directories are left open",
          "[dry_run]") {
  Fixture f;
  LaunchSpec spec = f.Spec({"--dry-run", "--standalone", "--master-port", "29555", "--run-id",
                            "job5", "--log-dir", "/logs", "--nproc-per-node", "2", "x.py"});
  for (DryRunFormat format : {DryRunFormat::kJson, DryRunFormat::kEnv, DryRunFormat::kTable}) {
    const std::string text = RenderDryRun(spec, f.env, format);
    CHECK_FALSE(Contains(text, kPortPlaceholder));
    CHECK_FALSE(Contains(text, kRunIdPlaceholder));
  }
  const auto json = nlohmann::json::parse(RenderDryRun(spec, f.env, DryRunFormat::kJson));
  CHECK(json["master_port"] == 29555);
  CHECK(json["log_dir"] == "/logs/job5_<random>");
  CHECK(json["ranks"][1]["env"]["TORCHELASTIC_ERROR_FILE"] ==
        "<temporary directory created at launch>/attempt_0/1/error.json");
  CHECK(json["ranks"][0]["env"]["TORCHELASTIC_RUN_ID"] == "job5");
}

// Runs `script` with a clean bash (env -i: an empty environment; bash is found
// on the default search path) and returns the environment it ends with.
std::map<std::string, std::string> SourceWithBash(const std::string& script) {
  TempDir dir;
  const std::string file = dir.Write("rank.env", script);
  const std::string command = "env -i bash --noprofile --norc -c '. \"$0\" && env -0' " + file;
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string output;
  char buffer[4096];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
  REQUIRE(pclose(pipe) == 0);
  std::map<std::string, std::string> env;
  size_t start = 0;
  for (size_t end = output.find('\0'); end != std::string::npos;
       start = end + 1, end = output.find('\0', start)) {
    const std::string entry = output.substr(start, end - start);
    const size_t eq = entry.find('=');
    env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return env;
}

TEST_CASE("dry run: the env format, sourced by bash, gives back every value", "[dry_run]") {
  Fixture f;
  f.env.Set("TOPS_VISIBLE_DEVICES", "4,5");
  LaunchSpec spec = f.Spec({"--dry-run",
                            "--format",
                            "env",
                            "--device",
                            "gcu",
                            "--nproc-per-node",
                            "2",
                            "--bind",
                            "rank",
                            "--env",
                            "QUOTES=it's \"quoted\"",
                            "--env",
                            "DOLLAR=$HOME `x` \\n $(y)",
                            "--env",
                            "NEWLINE=a\nb",
                            "--env",
                            "UNICODE=T20 卡",
                            "--env",
                            "EMPTY=",
                            "x.py",
                            "--tag",
                            "a'b\nc"});
  const std::string text = RenderDryRun(spec, f.env);
  CHECK(text.rfind("# gculaunch dry run: 2 ranks on node 0, world size 2\n", 0) == 0);

  const size_t rank1 = text.find("# rank 1 ");
  REQUIRE(rank1 != std::string::npos);
  const std::string sections[2] = {text.substr(0, rank1), text.substr(rank1)};
  const RankRuntime runtime = DryRunRuntime(spec);
  for (int local_rank = 0; local_rank < 2; ++local_rank) {
    INFO("local rank " << local_rank);
    const std::string& section = sections[local_rank];
    CHECK(Contains(section, "# rank " + std::to_string(local_rank) + " (local rank " +
                                std::to_string(local_rank) + "): "));
    const auto expected = f.env.ChangedIn(BuildRankEnv(spec, f.env, local_rank, 0, runtime));
    const auto sourced = SourceWithBash(section);
    for (const auto& [key, value] : expected) {
      INFO(key);
      REQUIRE(sourced.count(key) == 1);
      CHECK(sourced.at(key) == value);
    }
    CHECK(sourced.at("TOPS_VISIBLE_DEVICES") == (local_rank == 0 ? "4" : "5"));
    CHECK(sourced.at("NEWLINE") == "a\nb");
  }
  // The whole file also sources cleanly (the last rank's values win).
  CHECK(SourceWithBash(text).at("LOCAL_RANK") == "1");
}

TEST_CASE("dry run: the table shows topology, notes, argv and variables", "[dry_run]") {
  Fixture f;
  LaunchSpec spec = f.Spec({"--dry-run", "--device", "gcu", "--nproc-per-node", "2",
                            "--no-agent-store", "x.py", "two words"});
  const std::string text = RenderDryRun(spec, f.env);
  CHECK(text.rfind("gculaunch dry run: 2 ranks on node 0 of 1 (ranks 0-1 of world size 2)\n", 0) ==
        0);
  CHECK(Contains(text, "  store:   127.0.0.1:29500, hosted by rank 0\n"));
  CHECK(Contains(text, "  device:  enflame-gcu (backend eccl)\n"));
  CHECK(Contains(text, "  cards:   0,1 (assumed for the dry run), --bind all\n"));
  CHECK(Contains(text, "  run id:  none\n"));
  CHECK(Contains(text, "notes:\n"));
  for (const std::string& note : spec.notes) CHECK(Contains(text, "  - " + note + "\n"));
  CHECK(Contains(text, "no enflame-gcu cards found"));
  CHECK(Contains(text, "rank 1 (local rank 1):\n  argv: /usr/bin/python3 -u x.py 'two words'\n"));
  CHECK(Contains(text, "    TORCHELASTIC_USE_AGENT_STORE=False\n"));
  CHECK(Contains(text, "    GCULAUNCH_DEVICE=1\n"));
}

TEST_CASE("dry run: the layout line and platform warnings come first in every format",
          "[dry_run]") {
  Fixture f;
  // A platform's variables, plus a stray LOCAL_RANK that turns them off with a warning.
  f.env.Set("WORLD_SIZE", "2");
  f.env.Set("RANK", "1");
  f.env.Set("MASTER_ADDR", "jo-x-worker-0");
  f.env.Set("LOCAL_RANK", "0");
  auto cli = ParseCli({"--dry-run", "--nproc-per-node", "2", "x.py"}, f.env);
  REQUIRE(cli.ok());
  auto spec = MakeLaunchSpec(cli->options, f.env, f.probe, f.files);
  REQUIRE(spec.ok());
  const std::string layout = "layout: 1 node x 2 ranks, node 0, master 127.0.0.1:29500 (defaults)";
  const std::string warning =
      "WORLD_SIZE=2, RANK=1 and MASTER_ADDR=jo-x-worker-0 are ignored: LOCAL_RANK is set, so "
      "they belong to the launcher that started this process (torchrun or gculaunch), not to a "
      "job platform (give --nnodes, --node-rank and --master-addr to join a multi-node job)";
  REQUIRE(spec->layout == layout);
  REQUIRE(spec->warnings == std::vector<std::string>{warning});

  const std::string table = RenderDryRun(*spec, f.env, DryRunFormat::kTable);
  CHECK(table.rfind("gculaunch dry run: 2 ranks on node 0 of 1 (ranks 0-1 of world size 2)\n" +
                        layout + "\nwarning: " + warning + "\n  store:",
                    0) == 0);

  const auto json = nlohmann::ordered_json::parse(RenderDryRun(*spec, f.env, DryRunFormat::kJson));
  std::vector<std::string> notes = {layout, "warning: " + warning};
  notes.insert(notes.end(), spec->notes.begin(), spec->notes.end());
  // Then the contract variables the environment already held, listed all the same.
  notes.push_back(
      "from gculaunch's environment unchanged (listed all the same): LOCAL_RANK (rank 0), RANK "
      "(rank 1), WORLD_SIZE");
  CHECK(json["notes"].get<std::vector<std::string>>() == notes);

  const std::string env = RenderDryRun(*spec, f.env, DryRunFormat::kEnv);
  CHECK(env.rfind("# gculaunch dry run: 2 ranks on node 0, world size 2\n# " + layout +
                      "\n# warning: " + warning + "\n# note: ",
                  0) == 0);
}

TEST_CASE("dry run: a multi-node layout from the platform", "[dry_run]") {
  Fixture f;
  f.env.Set("WORLD_SIZE", "2");
  f.env.Set("RANK", "1");
  f.env.Set("MASTER_ADDR", "jo-x-worker-0");
  f.env.Set("MASTER_PORT", "29500");
  auto cli = ParseCli({"--dry-run", "--format", "json", "--nproc-per-node", "8", "x.py"}, f.env);
  REQUIRE(cli.ok());
  auto spec = MakeLaunchSpec(cli->options, f.env, f.probe, f.files);
  REQUIRE(spec.ok());
  const auto json = nlohmann::ordered_json::parse(RenderDryRun(*spec, f.env));
  CHECK(json["nnodes"] == 2);
  CHECK(json["node_rank"] == 1);
  CHECK(json["world_size"] == 16);
  CHECK(json["master_addr"] == "jo-x-worker-0");
  CHECK(json["notes"][0] ==
        "layout: 2 nodes x 8 ranks, node 1, master jo-x-worker-0:29500 (from WORLD_SIZE=2 "
        "(nodes), RANK=1, MASTER_ADDR, MASTER_PORT)");
  REQUIRE(json["ranks"].size() == 8);
  CHECK(json["ranks"][0]["rank"] == 8);
  CHECK(json["ranks"][7]["rank"] == 15);
  CHECK(json["ranks"][7]["env"]["RANK"] == "15");
  CHECK(json["ranks"][7]["env"]["WORLD_SIZE"] == "16");
  CHECK(json["ranks"][7]["env"]["GROUP_RANK"] == "1");
}

TEST_CASE("dry run: the ranks' torch and the NCCL error-handling name it gets", "[dry_run]") {
  Fixture f;
  LaunchSpec spec = f.Spec({"--dry-run", "--device", "cpu", "train.py"});
  spec.ranks_torch = RanksTorch{RanksTorch::State::kFound, "2.6.0",
                                "found by running /usr/bin/python3 once; cached"};
  const std::string table = RenderDryRun(spec, f.env, DryRunFormat::kTable);
  CHECK(Contains(table,
                 "\n  torch:   torch 2.6.0 (found by running /usr/bin/python3 once; cached) -> "
                 "TORCH_NCCL_ASYNC_ERROR_HANDLING\n"));
  CHECK(Contains(table, "    TORCH_NCCL_ASYNC_ERROR_HANDLING=1\n"));
  CHECK_FALSE(Contains(table, "    NCCL_ASYNC_ERROR_HANDLING=1\n"));
  const std::string env = RenderDryRun(spec, f.env, DryRunFormat::kEnv);
  CHECK(Contains(env, "# torch: torch 2.6.0 ("));
  CHECK_FALSE(Contains(env, "export NCCL_ASYNC_ERROR_HANDLING="));
  const auto json = nlohmann::ordered_json::parse(RenderDryRun(spec, f.env, DryRunFormat::kJson));
  CHECK(json["torch"]["version"] == "2.6.0");
  CHECK(json["torch"]["how"] == "found by running /usr/bin/python3 once; cached");
  CHECK(json["torch"]["nccl_error_handling"] ==
        std::vector<std::string>{"TORCH_NCCL_ASYNC_ERROR_HANDLING"});
  CHECK_FALSE(json["ranks"][0]["env"].contains("NCCL_ASYNC_ERROR_HANDLING"));

  spec.ranks_torch = RanksTorch{RanksTorch::State::kFound, "1.13.1", ""};
  const auto old = nlohmann::ordered_json::parse(RenderDryRun(spec, f.env, DryRunFormat::kJson));
  CHECK(old["ranks"][0]["env"]["NCCL_ASYNC_ERROR_HANDLING"] == "1");
  CHECK_FALSE(old["ranks"][0]["env"].contains("TORCH_NCCL_ASYNC_ERROR_HANDLING"));
}

TEST_CASE(
    "dry run: every variable of the rank contract is listed, also when the environment "
    "already holds its value",
    "[dry_run]") {
  Fixture f;
  // A platform node: its variables equal what the ranks get.
  f.env.Set("WORLD_SIZE", "2");
  f.env.Set("RANK", "1");
  f.env.Set("MASTER_ADDR", "127.0.0.1");
  f.env.Set("MASTER_PORT", "29511");
  f.env.Set("PYTHONUNBUFFERED", "1");
  const std::string note =
      "from gculaunch's environment unchanged (listed all the same): MASTER_ADDR, MASTER_PORT, "
      "PYTHONUNBUFFERED, RANK, WORLD_SIZE";
  const std::vector<std::string> contract = {
      "LOCAL_RANK", "RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_WORLD_SIZE",
      "WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
      "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
      "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_ERROR_FILE", "PYTHONUNBUFFERED",
      "PYTHONFAULTHANDLER",
      // Both: this spec's torch is not known.
      "NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "GCULAUNCH_BACKEND"};
  const std::vector<std::string> args = {"--dry-run", "--device", "cpu", "x.py"};

  SECTION("json") {
    std::vector<std::string> json_args = args;
    json_args.insert(json_args.begin(), {"--format", "json"});
    const LaunchSpec spec = f.Spec(json_args);
    REQUIRE(spec.world_size == 2);
    const auto json = nlohmann::ordered_json::parse(RenderDryRun(spec, f.env));
    REQUIRE(json["ranks"].size() == 1);
    const auto& env = json["ranks"][0]["env"];
    const EnvMap rank = BuildRankEnv(spec, f.env, 0, 0, DryRunRuntime(spec));
    for (const std::string& var : contract) {
      INFO(var);
      REQUIRE(env.contains(var));
      CHECK(env[var] == rank.GetOr(var, "<unset>"));
    }
    CHECK(env["MASTER_ADDR"] == "127.0.0.1");
    CHECK(env["MASTER_PORT"] == "29511");
    CHECK(env["WORLD_SIZE"] == "2");
    CHECK(env["RANK"] == "1");
    const auto notes = json["notes"].get<std::vector<std::string>>();
    CHECK(std::find(notes.begin(), notes.end(), note) != notes.end());
    // Variables outside the contract that gculaunch leaves alone are still not listed.
    CHECK_FALSE(env.contains("HOME"));
  }
  SECTION("env: sourced into an empty environment, it is the rank's contract") {
    std::vector<std::string> env_args = args;
    env_args.insert(env_args.begin(), {"--format", "env"});
    const LaunchSpec spec = f.Spec(env_args);
    const std::string text = RenderDryRun(spec, f.env);
    CHECK(Contains(text, "# note: " + note + "\n"));
    const auto sourced = SourceWithBash(text);
    const EnvMap rank = BuildRankEnv(spec, f.env, 0, 0, DryRunRuntime(spec));
    for (const std::string& var : contract) {
      INFO(var);
      REQUIRE(sourced.count(var) == 1);
      CHECK(sourced.at(var) == rank.GetOr(var, "<unset>"));
    }
  }
  SECTION("table") {
    const LaunchSpec spec = f.Spec(args);
    const std::string text = RenderDryRun(spec, f.env);
    CHECK(Contains(text, "    MASTER_ADDR=127.0.0.1\n"));
    CHECK(Contains(text, "    MASTER_PORT=29511\n"));
    CHECK(Contains(text, "    WORLD_SIZE=2\n"));
    CHECK(Contains(text, "  - " + note + "\n"));
  }
}

TEST_CASE("dry run: PYTHONFAULTHANDLER is shown, the user's value and the opt-out respected",
          "[dry_run]") {
  Fixture f;
  const auto env_of = [&](const std::vector<std::string>& args) {
    const LaunchSpec spec = f.Spec(args);
    return nlohmann::ordered_json::parse(RenderDryRun(spec, f.env))["ranks"][0]["env"];
  };
  CHECK(env_of({"--dry-run", "--format", "json", "x.py"})["PYTHONFAULTHANDLER"] == "1");
  CHECK_FALSE(env_of({"--dry-run", "--format", "json", "--no-python-faulthandler", "x.py"})
                  .contains("PYTHONFAULTHANDLER"));
  f.env.Set("PYTHONFAULTHANDLER", "");
  CHECK(env_of({"--dry-run", "--format", "json", "x.py"})["PYTHONFAULTHANDLER"] == "");
}

TEST_CASE("dry run: shell quoting", "[dry_run]") {
  CHECK(ShellQuote("plain") == "'plain'");
  CHECK(ShellQuote("") == "''");
  CHECK(ShellQuote("it's") == "'it'\\''s'");
  CHECK(ShellQuote("$x `y` \\") == "'$x `y` \\'");
}

TEST_CASE("dry run: --duplicate-*-filters show the parsed list, the file and the ranks",
          "[dry_run]") {
  Fixture f;
  LaunchSpec spec = f.Spec({"--dry-run", "--device", "cpu", "--nproc-per-node", "3", "--tee",
                            "0:3,1:1,2:3", "--local-ranks-filter", "1,2", "--log-dir", "/logs",
                            "--run-id", "r1", "--duplicate-stdout-filters", "loss,,x,it's",
                            "--duplicate-stderr-filters", "WARN", "train.py"});
  CHECK(spec.duplicate_stdout_filters == std::vector<std::string>{"loss,x", "it's"});
  CHECK(FilteredLocalRanks(spec, FilteredStream::kStdout) == std::vector<int>{1, 2});
  // Local rank 1 tees only stdout; local rank 0 is not shown on the console.
  CHECK(FilteredLocalRanks(spec, FilteredStream::kStderr) == std::vector<int>{2});
  CHECK(spec.warnings.empty());
  const std::string table = RenderDryRun(spec, f.env, DryRunFormat::kTable);
  CHECK(Contains(table,
                 "  filters: stdout lines containing one of ['loss,x', \"it's\"] -> "
                 "/logs/r1_<random>/attempt_<n>/filtered_stdout.log (from local ranks 1,2)\n"));
  CHECK(Contains(table,
                 "  filters: stderr lines containing one of ['WARN'] -> "
                 "/logs/r1_<random>/attempt_<n>/filtered_stderr.log (from local rank 2)\n"));
  const auto json = nlohmann::ordered_json::parse(RenderDryRun(spec, f.env, DryRunFormat::kJson));
  CHECK(json["duplicate_stdout_filters"].get<std::vector<std::string>>() ==
        std::vector<std::string>{"loss,x", "it's"});
  CHECK(json["filtered_stdout"]["file"] == "/logs/r1_<random>/attempt_<n>/filtered_stdout.log");
  CHECK(json["filtered_stdout"]["local_ranks"].get<std::vector<int>>() == std::vector<int>{1, 2});
  CHECK(json["filtered_stderr"]["local_ranks"].get<std::vector<int>>() == std::vector<int>{2});
  CHECK(Contains(RenderDryRun(spec, f.env, DryRunFormat::kEnv), "# filters: stderr lines"));
}

TEST_CASE("dry run: --duplicate-*-filters that copy nothing or everything are warned about",
          "[dry_run]") {
  Fixture f;
  // No --tee: torchrun creates the files and leaves them empty; so does gculaunch, with a
  // warning, and the files need a log directory even without --log-dir.
  LaunchSpec untee =
      f.Spec({"--dry-run", "--device", "cpu", "--duplicate-stdout-filters", "loss", "train.py"});
  CHECK(WantsLogFiles(untee));
  CHECK(FilteredLocalRanks(untee, FilteredStream::kStdout).empty());
  REQUIRE(untee.warnings.size() == 1);
  CHECK(untee.warnings[0] ==
        "--duplicate-stdout-filters: no local rank tees its stdout and is shown on the console, "
        "so each attempt's filtered_stdout.log stays empty, as with torchrun (add --tee 1 or "
        "--tee 3)");
  CHECK(Contains(RenderDryRun(untee, f.env, DryRunFormat::kTable),
                 "<TMPDIR>/torchelastic_<random>/none_<random>/attempt_<n>/"
                 "filtered_stdout.log (from no local rank)"));
  // An empty item is in every line.
  LaunchSpec all = f.Spec({"--dry-run", "--device", "cpu", "--tee", "2",
                           "--duplicate-stderr-filters", "WARN,", "train.py"});
  CHECK(all.duplicate_stderr_filters == std::vector<std::string>{"WARN", ""});
  REQUIRE(all.warnings.size() == 1);
  CHECK(Contains(all.warnings[0],
                 "--duplicate-stderr-filters has an empty filter, which every "
                 "line contains: all teed stderr lines are copied"));
}

}  // namespace
}  // namespace gculaunch
