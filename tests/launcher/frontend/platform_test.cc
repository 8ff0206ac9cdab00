#include "launcher/frontend/platform.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>

#include "launcher/frontend/cli.h"
#include "launcher/frontend/rank_env.h"
#include "tests/support/frontend_fakes.h"

namespace gculaunch {
namespace {

using testing::FakeDeviceProbe;
using testing::FakeFileAccess;

// The environment of a node: a plain shell environment plus `vars`.
EnvMap NodeEnv(std::initializer_list<std::pair<const std::string, std::string>> vars) {
  EnvMap env{{"PATH", "/usr/bin:/bin"}, {"HOME", "/home/u"}, {"LANG", "C.UTF-8"}};
  for (const auto& [key, value] : vars) env.Set(key, value);
  return env;
}

struct Fixture {
  FakeDeviceProbe probe;
  FakeFileAccess files;

  Fixture() { files.executables["python3"] = "/usr/bin/python3"; }

  CliOptions Options(const std::vector<std::string>& args, const EnvMap& env) {
    std::vector<std::string> full = args;
    full.push_back("train.py");
    auto cli = ParseCli(full, env);
    if (!cli.ok()) FAIL(cli.error().Format());
    return cli->options;
  }
  // ReadPlatform alone.
  Result<PlatformInfo> Read(const EnvMap& env, const std::vector<std::string>& args = {}) {
    return ReadPlatform(env, Options(args, env));
  }
  PlatformInfo Info(const EnvMap& env, const std::vector<std::string>& args = {}) {
    auto info = Read(env, args);
    if (!info.ok()) FAIL(info.error().Format());
    return std::move(*info);
  }
  std::string ReadError(const EnvMap& env, const std::vector<std::string>& args = {}) {
    auto info = Read(env, args);
    REQUIRE_FALSE(info.ok());
    return info.error().Format();
  }
  // The whole front end: ParseCli, then MakeLaunchSpec reading the platform.
  Result<LaunchSpec> Make(const EnvMap& env, const std::vector<std::string>& args = {}) {
    return MakeLaunchSpec(Options(args, env), env, probe, files);
  }
  LaunchSpec Spec(const EnvMap& env, const std::vector<std::string>& args = {}) {
    auto spec = Make(env, args);
    if (!spec.ok()) FAIL(spec.error().Format());
    return std::move(*spec);
  }
  std::string Err(const EnvMap& env, const std::vector<std::string>& args = {}) {
    auto spec = Make(env, args);
    REQUIRE_FALSE(spec.ok());
    return spec.error().Format();
  }
};

std::string Lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

// What gculaunch decides for each rank of `spec`: its own variables only (the
// rest of a rank's environment is inherited from the node and differs between
// platforms by design).
std::vector<std::map<std::string, std::string>> OwnedEnvOfRanks(const LaunchSpec& spec,
                                                                const EnvMap& base) {
  const RankRuntime runtime =
      ResolveRankRuntime(spec, LaunchChoices{"29999", "generated", "/scratch"});
  std::vector<std::map<std::string, std::string>> ranks;
  for (int local_rank = 0; local_rank < spec.nproc_per_node; ++local_rank) {
    const EnvMap env = BuildRankEnv(spec, base, local_rank, 0, runtime);
    std::map<std::string, std::string> owned;
    for (const std::string& key : OwnedRankVariables(spec.profile)) {
      owned[key] = env.GetOr(key, "<unset>");
    }
    ranks.push_back(std::move(owned));
  }
  return ranks;
}

// ---------------------------------------------------------------------------
// Slurm host lists

TEST_CASE("platform: Slurm host lists expand as Slurm does", "[platform]") {
  const std::vector<std::pair<std::string, std::vector<std::string>>> table = {
      {"node07", {"node07"}},
      {"node[01-04,07]", {"node01", "node02", "node03", "node04", "node07"}},
      {"a[1-2]-ib,b3", {"a1-ib", "a2-ib", "b3"}},
      {"n[8-11]", {"n8", "n9", "n10", "n11"}},
      {"n[098-101]", {"n098", "n099", "n100", "n101"}},
      {"n[001-3]", {"n001", "n002", "n003"}},
      {"rack[1-2]-n[01-02]", {"rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"}},
      {"gpu[3],cpu[10-11]x,login", {"gpu3", "cpu10x", "cpu11x", "login"}},
      {"10.0.0.[1-2]", {"10.0.0.1", "10.0.0.2"}},
      {"[5-6]", {"5", "6"}},
      {"jo-x-worker-0.jo-x", {"jo-x-worker-0.jo-x"}},
  };
  for (const auto& [list, hosts] : table) {
    INFO(list);
    auto expanded = ExpandSlurmHostList(list);
    REQUIRE(expanded.ok());
    CHECK(*expanded == hosts);
  }
}

TEST_CASE("platform: malformed Slurm host lists are errors naming the problem", "[platform]") {
  const std::vector<std::pair<std::string, std::string>> table = {
      {"", "empty host list"},
      {"node[1-2", "unclosed '['"},
      {"node[1-2,b3", "unclosed '['"},
      {"node1-2]", "']' without '['"},
      {"node[[1]]", "nested '['"},
      {"node[]", "empty '[]' in 'node[]'"},
      {"node[1,,2]", "empty item in '[1,,2]'"},
      {"node[1-2,]", "empty item in '[1-2,]'"},
      {"node[a-b]", "'a-b' is not a number or a range such as 01-04"},
      {"node[1-]", "'1-' is not a number or a range such as 01-04"},
      {"node[-1]", "'-1' is not a number or a range such as 01-04"},
      {"node[1-2-3]", "'1-2-3' is not a number or a range such as 01-04"},
      {"node[3-1]", "range '3-1' runs backwards"},
      {"a,,b", "empty host name"},
      {"a,", "empty host name"},
      {",a", "empty host name"},
      {"a b", "'a b' contains a space"},
      {"n[0-2000000]", "it expands to more than 1048576 hosts"},
      {"n[0-1023]x[0-1023]y[0-1]", "it expands to more than 1048576 hosts"},
      {"n[1234567890123456789]", "'1234567890123456789' is not a number or a range such as 01-04"},
  };
  for (const auto& [list, problem] : table) {
    INFO(list);
    auto expanded = ExpandSlurmHostList(list);
    REQUIRE_FALSE(expanded.ok());
    CHECK(expanded.error().what == problem);
  }
}

// ---------------------------------------------------------------------------
// Every layout gives the same job

TEST_CASE("platform: every platform layout gives the same per-rank environment", "[platform]") {
  Fixture f;
  // One job: 2 nodes x 4 ranks; this is node 1; node 0 is "node0", port 29500.
  struct Layout {
    std::string name;
    EnvMap env;
    std::vector<std::string> args;
    std::string layout;
  };
  const std::vector<Layout> layouts = {
      {"flags",
       NodeEnv({}),
       {"--nnodes", "2", "--node-rank", "1", "--master-addr", "node0", "--master-port", "29500",
        "--nproc-per-node", "4"},
       "layout: 2 nodes x 4 ranks, node 1, master node0:29500 (from --nnodes 2, --node-rank 1, "
       "--master-addr, --master-port)"},
      {"Volcano / KubeBrain / older Kubeflow",
       NodeEnv({{"WORLD_SIZE", "2"},
                {"RANK", "1"},
                {"MASTER_ADDR", "node0"},
                {"MASTER_PORT", "29500"}}),
       {"--nproc-per-node", "4"},
       "layout: 2 nodes x 4 ranks, node 1, master node0:29500 (from WORLD_SIZE=2 (nodes), "
       "RANK=1, MASTER_ADDR, MASTER_PORT)"},
      {"WORLD_SIZE counting processes",
       NodeEnv({{"WORLD_SIZE", "8"},
                {"RANK", "1"},
                {"MASTER_ADDR", "node0"},
                {"MASTER_PORT", "29500"}}),
       {"--platform-world-size", "procs", "--nproc-per-node", "4"},
       "layout: 2 nodes x 4 ranks, node 1, master node0:29500 (from WORLD_SIZE=8 (processes, "
       "4 per node), RANK=1, MASTER_ADDR, MASTER_PORT)"},
      {"newer Kubeflow PyTorchJob",
       NodeEnv({{"PET_NNODES", "2"},
                {"PET_NPROC_PER_NODE", "4"},
                {"PET_NODE_RANK", "1"},
                {"PET_MASTER_ADDR", "node0"},
                {"PET_MASTER_PORT", "29500"},
                {"WORLD_SIZE", "8"},
                {"RANK", "1"},
                {"MASTER_ADDR", "node0"},
                {"MASTER_PORT", "29500"},
                {"PYTHONUNBUFFERED", "0"}}),
       {},
       "layout: 2 nodes x 4 ranks, node 1, master node0:29500 (from PET_NNODES=2, "
       "PET_NODE_RANK=1, PET_MASTER_ADDR, PET_MASTER_PORT)"},
      {"Kubeflow Trainer v2",
       NodeEnv({{"PET_NNODES", "2"},
                {"PET_NPROC_PER_NODE", "4"},
                {"PET_NODE_RANK", "1"},
                {"PET_MASTER_ADDR", "node0"},
                {"PET_MASTER_PORT", "29500"}}),
       {},
       "layout: 2 nodes x 4 ranks, node 1, master node0:29500 (from PET_NNODES=2, "
       "PET_NODE_RANK=1, PET_MASTER_ADDR, PET_MASTER_PORT)"},
      {"Slurm step",
       NodeEnv({{"SLURM_JOB_ID", "77"},
                {"SLURM_STEP_ID", "0"},
                {"SLURM_STEPID", "0"},
                {"SLURM_PROCID", "1"},
                {"SLURM_NODEID", "1"},
                {"SLURM_LOCALID", "0"},
                {"SLURM_NTASKS", "2"},
                {"SLURM_STEP_NUM_TASKS", "2"},
                {"SLURM_NNODES", "2"},
                {"SLURM_STEP_NUM_NODES", "2"},
                {"SLURM_STEP_NODELIST", "node[0-1]"},
                {"SLURM_JOB_NODELIST", "node[0-1]"}}),
       {"--nproc-per-node", "4"},
       "layout: 2 nodes x 4 ranks, node 1, master node0:29500 (from SLURM_STEP_NUM_TASKS=2, "
       "SLURM_PROCID=1, first host of SLURM_STEP_NODELIST)"},
      {"Open MPI",
       NodeEnv({{"OMPI_COMM_WORLD_SIZE", "2"},
                {"OMPI_COMM_WORLD_RANK", "1"},
                {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"},
                {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                {"OMPI_COMM_WORLD_NODE_RANK", "0"},
                {"MASTER_ADDR", "node0"},
                {"MASTER_PORT", "29500"}}),
       {"--nproc-per-node", "4"},
       "layout: 2 nodes x 4 ranks, node 1, master node0:29500 (from OMPI_COMM_WORLD_SIZE=2, "
       "OMPI_COMM_WORLD_RANK=1, MASTER_ADDR, MASTER_PORT)"},
  };
  const LaunchSpec reference = f.Spec(layouts[0].env, layouts[0].args);
  const auto expected = OwnedEnvOfRanks(reference, layouts[0].env);
  REQUIRE(expected.size() == 4);
  CHECK(expected[0].at("RANK") == "4");
  CHECK(expected[3].at("RANK") == "7");
  CHECK(expected[3].at("WORLD_SIZE") == "8");
  CHECK(expected[3].at("GROUP_RANK") == "1");
  CHECK(expected[3].at("LOCAL_WORLD_SIZE") == "4");
  CHECK(expected[3].at("MASTER_ADDR") == "node0");
  CHECK(expected[3].at("MASTER_PORT") == "29500");
  for (const Layout& layout : layouts) {
    INFO(layout.name);
    const LaunchSpec spec = f.Spec(layout.env, layout.args);
    CHECK(spec.nnodes == 2);
    CHECK(spec.node_rank == 1);
    CHECK(spec.nproc_per_node == 4);
    CHECK(spec.rank_offset == 4);
    CHECK(spec.world_size == 8);
    CHECK(spec.master_addr == "node0");
    CHECK(spec.master_port == 29500);
    CHECK(spec.layout == layout.layout);
    CHECK(spec.warnings.empty());
    CHECK(OwnedEnvOfRanks(spec, layout.env) == expected);
  }
}

TEST_CASE("platform: node 0 of each layout and the defaults", "[platform]") {
  Fixture f;
  LaunchSpec master =
      f.Spec(NodeEnv({{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"MASTER_ADDR", "jo-x-worker-0"}}),
             {"--nproc-per-node", "8"});
  CHECK(master.layout ==
        "layout: 2 nodes x 8 ranks, node 0, master jo-x-worker-0:29500 (from WORLD_SIZE=2 "
        "(nodes), RANK=0, MASTER_ADDR)");
  CHECK(Lines(master.notes) ==
        "device cpu: --device auto found no accelerator device files\n"
        "interpreter /usr/bin/python3 (python3 on PATH)\n"
        "OMP_NUM_THREADS=1 for every rank (torchrun's default with more than one rank per "
        "node; set OMP_NUM_THREADS to choose another value)\n"
        "ranks 0-7 of 16 assume 8 ranks on every node (RANK = node rank x 8 + local rank)\n");

  LaunchSpec alone = f.Spec(NodeEnv({}), {"--nproc-per-node", "2"});
  CHECK(alone.layout == "layout: 1 node x 2 ranks, node 0, master 127.0.0.1:29500 (defaults)");
  LaunchSpec standalone = f.Spec(NodeEnv({}), {"--standalone"});
  CHECK(standalone.layout ==
        "layout: 1 node x 1 rank, node 0, master 127.0.0.1:<port chosen at launch> (from "
        "--standalone)");
  LaunchSpec v6 = f.Spec(NodeEnv({{"WORLD_SIZE", "2"},
                                  {"RANK", "1"},
                                  {"MASTER_ADDR", "[fd00::1]"},
                                  {"MASTER_PORT", "23456"}}));
  CHECK(v6.master_addr == "fd00::1");
  CHECK(v6.layout ==
        "layout: 2 nodes x 1 rank, node 1, master [fd00::1]:23456 (from WORLD_SIZE=2 (nodes), "
        "RANK=1, MASTER_ADDR, MASTER_PORT)");
  LaunchSpec endpoint =
      f.Spec(NodeEnv({{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_ADDR", "node0"}}),
             {"--rdzv-endpoint", "store:1234"});
  CHECK(endpoint.layout ==
        "layout: 2 nodes x 1 rank, node 1, master store:1234 (from WORLD_SIZE=2 (nodes), "
        "RANK=1, --rdzv-endpoint)");
  LaunchSpec rank0_store = f.Spec(NodeEnv({}), {"--no-agent-store", "--worker-port", "4000"});
  CHECK(rank0_store.layout ==
        "layout: 1 node x 1 rank, node 0, master 127.0.0.1:4000 (from --worker-port)");
}

// ---------------------------------------------------------------------------
// Precedence: flags > PET_* > Slurm step > Open MPI > WORLD_SIZE/RANK

TEST_CASE("platform: precedence between the levels", "[platform]") {
  Fixture f;
  const std::initializer_list<std::pair<const std::string, std::string>> slurm = {
      {"SLURM_STEP_ID", "3"},
      {"SLURM_PROCID", "2"},
      {"SLURM_STEP_NUM_TASKS", "3"},
      {"SLURM_STEP_NUM_NODES", "3"},
      {"SLURM_STEP_NODELIST", "s[1-3]"}};
  EnvMap all = NodeEnv(slurm);
  for (const auto& [key, value] : std::map<std::string, std::string>{{"OMPI_COMM_WORLD_SIZE", "3"},
                                                                     {"OMPI_COMM_WORLD_RANK", "2"},
                                                                     {"WORLD_SIZE", "5"},
                                                                     {"RANK", "4"},
                                                                     {"MASTER_ADDR", "w0"},
                                                                     {"MASTER_PORT", "4444"}}) {
    all.Set(key, value);
  }

  SECTION("a Slurm step ranks above Open MPI and WORLD_SIZE/RANK") {
    PlatformInfo info = f.Info(all);
    CHECK(info.name == "Slurm step");
    CHECK(info.nnodes == 3);
    CHECK(info.node_rank == 2);
    CHECK(info.master_addr == "s1");
    CHECK(info.master_port == 4444);  // Slurm has no port of its own: MASTER_PORT
    CHECK(info.warnings.empty());
    CHECK(Lines(info.notes) ==
          "OMPI_COMM_WORLD_SIZE=3 and OMPI_COMM_WORLD_RANK=2 are not read: the Slurm step gives "
          "the layout\n"
          "WORLD_SIZE=5, RANK=4 and MASTER_ADDR=w0 are not read: the Slurm step gives the "
          "layout\n");
  }
  SECTION("Open MPI ranks above WORLD_SIZE/RANK") {
    EnvMap env = all;
    env.Erase("SLURM_STEP_ID");
    PlatformInfo info = f.Info(env);
    CHECK(info.name == "Open MPI");
    CHECK(info.nnodes == 3);
    CHECK(info.node_rank == 2);
    CHECK(info.master_addr == "w0");
    CHECK(info.master_addr_from == "MASTER_ADDR");
    CHECK(info.master_port == 4444);
    CHECK(Lines(info.notes) ==
          "WORLD_SIZE=5 and RANK=4 are not read: Open MPI's variables give the layout\n");
  }
  SECTION("WORLD_SIZE/RANK when nothing else is there") {
    EnvMap env = all;
    env.Erase("SLURM_STEP_ID");
    env.Erase("OMPI_COMM_WORLD_SIZE");
    env.Erase("OMPI_COMM_WORLD_RANK");
    PlatformInfo info = f.Info(env);
    CHECK(info.name == "WORLD_SIZE/RANK");
    CHECK(info.nnodes == 5);
    CHECK(info.node_rank == 4);
    CHECK(info.master_addr == "w0");
    CHECK(info.notes.empty());
  }
  SECTION("PET_* variables rank above every platform level, value by value") {
    EnvMap env = all;
    env.Set("PET_NNODES", "4");
    env.Set("PET_NODE_RANK", "3");
    LaunchSpec spec = f.Spec(env);
    CHECK(spec.nnodes == 4);
    CHECK(spec.node_rank == 3);
    CHECK(spec.master_addr == "s1");  // still the Slurm step's
    CHECK(spec.layout ==
          "layout: 4 nodes x 1 rank, node 3, master s1:4444 (from PET_NNODES=4, "
          "PET_NODE_RANK=3, first host of SLURM_STEP_NODELIST, MASTER_PORT)");
    CHECK(std::count(spec.notes.begin(), spec.notes.end(),
                     "SLURM_STEP_NUM_TASKS=3 and SLURM_PROCID=2 are not read: PET_NNODES and "
                     "PET_NODE_RANK take precedence") == 1);
  }
  SECTION("flags rank above PET_* variables and the platform") {
    EnvMap env = all;
    env.Set("PET_NNODES", "4");
    env.Set("PET_MASTER_ADDR", "pet-master");
    LaunchSpec spec =
        f.Spec(env, {"--nnodes", "6", "--master-addr", "flag-master", "--master-port", "5555"});
    CHECK(spec.nnodes == 6);
    CHECK(spec.node_rank == 2);  // the Slurm step's: no flag or PET_ variable gives it
    CHECK(spec.master_addr == "flag-master");
    CHECK(spec.master_port == 5555);
    CHECK(spec.layout ==
          "layout: 6 nodes x 1 rank, node 2, master flag-master:5555 (from --nnodes 6, "
          "SLURM_PROCID=2, --master-addr, --master-port)");
  }
  SECTION("a flag replaces one value of the WORLD_SIZE/RANK level") {
    EnvMap env = NodeEnv({{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_ADDR", "node0"}});
    LaunchSpec spec = f.Spec(env, {"--node-rank", "0"});
    CHECK(spec.nnodes == 2);
    CHECK(spec.node_rank == 0);
    CHECK(spec.layout ==
          "layout: 2 nodes x 1 rank, node 0, master node0:29500 (from WORLD_SIZE=2 (nodes), "
          "--node-rank 0, MASTER_ADDR)");
    CHECK(std::count(spec.notes.begin(), spec.notes.end(),
                     "RANK=1 is not read: --node-rank takes precedence") == 1);
  }
  SECTION("with flags for everything, broken platform values are not even read") {
    EnvMap env = NodeEnv(
        {{"WORLD_SIZE", "two"}, {"RANK", "x"}, {"MASTER_ADDR", "a b"}, {"MASTER_PORT", "-1"}});
    LaunchSpec spec = f.Spec(env, {"--nnodes", "1", "--node-rank", "0", "--master-addr",
                                   "127.0.0.1", "--master-port", "29500"});
    CHECK(spec.nnodes == 1);
    CHECK(spec.layout ==
          "layout: 1 node x 1 rank, node 0, master 127.0.0.1:29500 (from --nnodes 1, "
          "--node-rank 0, --master-addr, --master-port)");
    CHECK(std::count(spec.notes.begin(), spec.notes.end(),
                     "WORLD_SIZE=two and RANK=x are not read: --nnodes and --node-rank take "
                     "precedence") == 1);
  }
}

TEST_CASE("platform: the Slurm step's details", "[platform]") {
  Fixture f;
  SECTION("the job's node list when the step has none; zero padding kept") {
    PlatformInfo info = f.Info(NodeEnv({{"SLURM_STEP_ID", "0"},
                                        {"SLURM_PROCID", "0"},
                                        {"SLURM_NTASKS", "4"},
                                        {"SLURM_JOB_NODELIST", "gcu[007-009,011]"}}));
    CHECK(info.nnodes == 4);
    CHECK(info.nnodes_from == "SLURM_NTASKS=4");
    CHECK(info.master_addr == "gcu007");
    CHECK(info.master_addr_from == "first host of SLURM_JOB_NODELIST");
    CHECK_FALSE(info.master_port.has_value());
  }
  SECTION("a single-task step (salloc's interactive step) is one node") {
    LaunchSpec spec = f.Spec(NodeEnv({{"SLURM_STEP_ID", "4294967290"},
                                      {"SLURM_PROCID", "0"},
                                      {"SLURM_STEP_NUM_TASKS", "1"},
                                      {"SLURM_STEP_NUM_NODES", "1"},
                                      {"SLURM_STEP_NODELIST", "gcu01"}}));
    CHECK(spec.nnodes == 1);
    CHECK(spec.master_addr == "gcu01");
  }
  SECTION("an allocation without a step is not read, and says so") {
    LaunchSpec spec = f.Spec(NodeEnv(
        {{"SLURM_JOB_ID", "77"}, {"SLURM_NNODES", "2"}, {"SLURM_JOB_NODELIST", "gcu[01-02]"}}));
    CHECK(spec.nnodes == 1);
    CHECK(spec.master_addr == "127.0.0.1");
    CHECK(spec.warnings.empty());
    CHECK(spec.notes.front() ==
          "SLURM_JOB_ID=77 is set but SLURM_STEP_ID is not: outside an srun step gculaunch does "
          "not read Slurm's variables (start it with srun --ntasks-per-node=1 to run on every "
          "node of the allocation)");
  }
  SECTION("MASTER_ADDR is not read in a step: the node list names the master") {
    EnvMap env = NodeEnv({{"SLURM_STEP_ID", "0"},
                          {"SLURM_PROCID", "1"},
                          {"SLURM_STEP_NUM_TASKS", "2"},
                          {"SLURM_STEP_NODELIST", "n[1-2]"},
                          {"MASTER_ADDR", "n1-ib"},
                          {"MASTER_PORT", "23456"}});
    PlatformInfo info = f.Info(env);
    CHECK(info.master_addr == "n1");
    CHECK(info.master_port == 23456);
    CHECK(Lines(info.notes) == "MASTER_ADDR=n1-ib is not read: the Slurm step gives the layout\n");
    PlatformInfo flagged = f.Info(env, {"--master-addr", "n1-ib"});
    CHECK_FALSE(flagged.master_addr.has_value());
    CHECK(flagged.notes.empty());
  }
  SECTION("mpirun inside the step: agreeing Open MPI variables are fine") {
    PlatformInfo info = f.Info(NodeEnv({{"SLURM_STEP_ID", "0"},
                                        {"SLURM_PROCID", "1"},
                                        {"SLURM_STEP_NUM_TASKS", "2"},
                                        {"SLURM_STEP_NODELIST", "n[1-2]"},
                                        {"OMPI_COMM_WORLD_SIZE", "2"},
                                        {"OMPI_COMM_WORLD_RANK", "1"}}));
    CHECK(info.node_rank == 1);
  }
}

// ---------------------------------------------------------------------------
// Guards against stray variables

TEST_CASE("platform: a stray WORLD_SIZE without MASTER_ADDR is ignored with a warning",
          "[platform]") {
  Fixture f;
  LaunchSpec spec =
      f.Spec(NodeEnv({{"WORLD_SIZE", "2"}, {"RANK", "1"}}), {"--nproc-per-node", "2"});
  CHECK(spec.nnodes == 1);
  CHECK(spec.node_rank == 0);
  CHECK(spec.master_addr == "127.0.0.1");
  CHECK(spec.layout == "layout: 1 node x 2 ranks, node 0, master 127.0.0.1:29500 (defaults)");
  CHECK(Lines(spec.warnings) ==
        "WORLD_SIZE=2 and RANK=1 are ignored: MASTER_ADDR is not set, so they look left over "
        "in this shell rather than set by a job platform (set MASTER_ADDR to use them, or give "
        "--nnodes, --node-rank and --master-addr)\n");

  LaunchSpec one = f.Spec(NodeEnv({{"WORLD_SIZE", "4"}}));
  CHECK(Lines(one.warnings) ==
        "WORLD_SIZE=4 is ignored: MASTER_ADDR is not set, so it looks left over in this shell "
        "rather than set by a job platform (set MASTER_ADDR to use them, or give --nnodes, "
        "--node-rank and --master-addr)\n");

  // With the topology from flags there is nothing to warn about: a note says why.
  LaunchSpec flagged =
      f.Spec(NodeEnv({{"WORLD_SIZE", "2"}, {"RANK", "1"}}), {"--nnodes", "1", "--node-rank", "0"});
  CHECK(flagged.warnings.empty());
  CHECK(flagged.notes.front() ==
        "WORLD_SIZE=2 and RANK=1 are not read: --nnodes and --node-rank take precedence");
}

TEST_CASE("platform: WORLD_SIZE/RANK of a parent launcher are ignored with a warning",
          "[platform]") {
  Fixture f;
  // What a rank of torchrun (or of gculaunch) sees.
  EnvMap rank_env = NodeEnv({{"WORLD_SIZE", "4"},
                             {"RANK", "3"},
                             {"MASTER_ADDR", "127.0.0.1"},
                             {"MASTER_PORT", "29500"},
                             {"TORCHELASTIC_RUN_ID", "none"}});
  LaunchSpec spec = f.Spec(rank_env);
  CHECK(spec.nnodes == 1);
  CHECK(spec.node_rank == 0);
  CHECK(Lines(spec.warnings) ==
        "WORLD_SIZE=4, RANK=3, MASTER_ADDR=127.0.0.1 and MASTER_PORT=29500 are ignored: "
        "TORCHELASTIC_RUN_ID is set, so they belong to the launcher that started this process "
        "(torchrun or gculaunch), not to a job platform (give --nnodes, --node-rank and "
        "--master-addr to join a multi-node job)\n");

  EnvMap local = NodeEnv({{"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}, {"MASTER_ADDR", "m"}});
  LaunchSpec by_local_rank = f.Spec(local);
  CHECK(by_local_rank.nnodes == 1);
  CHECK(Lines(by_local_rank.warnings) ==
        "WORLD_SIZE=4 and MASTER_ADDR=m are ignored: LOCAL_RANK is set, so they belong to the "
        "launcher that started this process (torchrun or gculaunch), not to a job platform "
        "(give --nnodes, --node-rank and --master-addr to join a multi-node job)\n");
}

TEST_CASE("platform: --standalone ignores every platform variable", "[platform]") {
  Fixture f;
  EnvMap env = NodeEnv(
      {{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "23456"}});
  LaunchSpec spec = f.Spec(env, {"--standalone", "--nproc-per-node", "2"});
  CHECK(spec.nnodes == 1);
  CHECK(spec.node_rank == 0);
  CHECK(spec.master_addr == "127.0.0.1");
  CHECK(spec.master_port == 0);
  CHECK(Lines(spec.warnings) ==
        "--standalone ignores the job platform's WORLD_SIZE=2, RANK=1, MASTER_ADDR=node0 and "
        "MASTER_PORT=23456: this node runs a job of its own\n");

  // Variables that describe a single node only earn a note.
  LaunchSpec single = f.Spec(NodeEnv({{"WORLD_SIZE", "1"}, {"RANK", "0"}}), {"--standalone"});
  CHECK(single.warnings.empty());
  CHECK(single.notes.front() ==
        "--standalone ignores the job platform's WORLD_SIZE=1 and RANK=0: this node runs a job "
        "of its own");

  EnvMap slurm = NodeEnv({{"SLURM_STEP_ID", "0"},
                          {"SLURM_PROCID", "1"},
                          {"SLURM_STEP_NUM_TASKS", "2"},
                          {"SLURM_STEP_NODELIST", "n[1-2]"},
                          {"OMPI_COMM_WORLD_SIZE", "2"},
                          {"OMPI_COMM_WORLD_RANK", "1"}});
  PlatformInfo info = f.Info(slurm, {"--standalone"});
  CHECK_FALSE(info.nnodes.has_value());
  CHECK_FALSE(info.master_addr.has_value());
  CHECK(Lines(info.warnings) ==
        "--standalone ignores the job platform's SLURM_PROCID=1, SLURM_STEP_NUM_TASKS=2, "
        "OMPI_COMM_WORLD_SIZE=2 and OMPI_COMM_WORLD_RANK=1: this node runs a job of its own\n");
  PlatformInfo by_pet = f.Info(NodeEnv({{"WORLD_SIZE", "3"}, {"PET_STANDALONE", "1"}}));
  CHECK(Lines(by_pet.warnings) ==
        "PET_STANDALONE ignores the job platform's WORLD_SIZE=3: this node runs a job of its "
        "own\n");
}

TEST_CASE("platform: empty variables count as unset", "[platform]") {
  Fixture f;
  PlatformInfo info = f.Info(NodeEnv({{"WORLD_SIZE", ""},
                                      {"RANK", ""},
                                      {"MASTER_ADDR", ""},
                                      {"SLURM_STEP_ID", ""},
                                      {"OMPI_COMM_WORLD_SIZE", ""}}));
  CHECK(info.name.empty());
  CHECK_FALSE(info.nnodes.has_value());
  CHECK(info.warnings.empty());
  CHECK(info.notes.empty());
}

TEST_CASE("platform: --platform-world-size without a WORLD_SIZE to read is noted", "[platform]") {
  Fixture f;
  LaunchSpec spec = f.Spec(NodeEnv({}), {"--platform-world-size", "procs"});
  CHECK(spec.notes.front() == "--platform-world-size procs has no effect: WORLD_SIZE is not read");
  LaunchSpec pet = f.Spec(NodeEnv({{"PET_PLATFORM_WORLD_SIZE", "nodes"}}));
  CHECK(pet.notes.front() == "PET_PLATFORM_WORLD_SIZE=nodes has no effect: WORLD_SIZE is not read");
}

// ---------------------------------------------------------------------------
// Errors: one line each, naming what was read from where and the fix

TEST_CASE("platform: WORLD_SIZE/RANK errors", "[platform]") {
  Fixture f;
  auto env = [](std::initializer_list<std::pair<const std::string, std::string>> vars) {
    EnvMap out = NodeEnv({{"MASTER_ADDR", "node0"}});
    for (const auto& [key, value] : vars) out.Set(key, value);
    return out;
  };
  CHECK(f.Err(env({{"WORLD_SIZE", "two"}, {"RANK", "1"}})) ==
        "gculaunch: WORLD_SIZE 'two': expected the number of nodes, a positive integer (fix: "
        "fix WORLD_SIZE, or give --nnodes N)");
  CHECK(f.Err(env({{"WORLD_SIZE", "0"}, {"RANK", "0"}})) ==
        "gculaunch: WORLD_SIZE '0': expected the number of nodes, a positive integer (fix: fix "
        "WORLD_SIZE, or give --nnodes N)");
  CHECK(f.Err(env({{"WORLD_SIZE", "2"}, {"RANK", "-1"}})) ==
        "gculaunch: RANK '-1': expected this node's index, an integer from 0 (fix: fix RANK, or "
        "give --node-rank N)");
  CHECK(f.Err(env({{"WORLD_SIZE", "2"}, {"RANK", "2"}})) ==
        "gculaunch: RANK=2 is not a node of this job: WORLD_SIZE=2 (nodes) gives node ranks 0 "
        "to 1 (fix: check RANK and WORLD_SIZE)");
  CHECK(f.Err(env({{"WORLD_SIZE", "2"}, {"RANK", "5"}}), {"--nnodes", "3"}) ==
        "gculaunch: RANK=5 is not a node of this job: --nnodes 3 gives node ranks 0 to 2 (fix: "
        "check RANK and --nnodes)");
  CHECK(f.Err(env({{"WORLD_SIZE", "2"}, {"RANK", "1"}}), {"--node-rank", "2"}) ==
        "gculaunch: --node-rank 2 is not a node of this job: WORLD_SIZE=2 (nodes) gives node "
        "ranks 0 to 1 (fix: check --node-rank and WORLD_SIZE)");
  CHECK(f.Err(env({{"WORLD_SIZE", "2"}})) ==
        "gculaunch: WORLD_SIZE=2 (nodes) is set but RANK is not: gculaunch cannot tell which "
        "node this is (fix: set RANK to this node's index (0 on the master node), or give "
        "--node-rank N)");
  CHECK(f.Err(env({{"RANK", "1"}})) ==
        "gculaunch: RANK=1 is set but WORLD_SIZE is not: gculaunch cannot tell how many nodes "
        "there are (fix: set WORLD_SIZE to the number of nodes, or give --nnodes N)");
  CHECK(f.Err(NodeEnv({{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_ADDR", "a b"}})) ==
        "gculaunch: MASTER_ADDR 'a b': expected a host name or IP address (fix: fix "
        "MASTER_ADDR, or give --master-addr HOST)");
  for (const std::string port : {"-1", "0", "65536", "29500x"}) {
    INFO(port);
    CHECK(f.Err(env({{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_PORT", port}})) ==
          "gculaunch: MASTER_PORT '" + port +
              "': expected a port number 1-65535 (fix: fix MASTER_PORT, or give --master-port "
              "PORT)");
  }
  // A control character in a value stays on one line.
  CHECK(f.Err(env({{"WORLD_SIZE", "2\n"}, {"RANK", "1"}})) ==
        "gculaunch: WORLD_SIZE '2\\n': expected the number of nodes, a positive integer (fix: "
        "fix WORLD_SIZE, or give --nnodes N)");
}

TEST_CASE("platform: WORLD_SIZE read as processes", "[platform]") {
  Fixture f;
  EnvMap env = NodeEnv({{"WORLD_SIZE", "12"}, {"RANK", "1"}, {"MASTER_ADDR", "node0"}});
  CHECK(f.Err(env, {"--platform-world-size", "procs", "--nproc-per-node", "8"}) ==
        "gculaunch: WORLD_SIZE=12 read as processes is not a multiple of --nproc-per-node 8 "
        "(read as nodes it would be 12 nodes) (fix: check --nproc-per-node, or use "
        "--platform-world-size nodes if WORLD_SIZE counts nodes)");
  CHECK(f.Err(env, {"--platform-world-size", "procs"}) ==
        "gculaunch: WORLD_SIZE=12 read as processes (--platform-world-size procs) needs "
        "--nproc-per-node N to count the nodes (fix: give --nproc-per-node N (the ranks on each "
        "node), or --nnodes N)");
  CHECK(f.Err(env, {"--platform-world-size", "procs", "--nproc-per-node", "auto"}) ==
        "gculaunch: WORLD_SIZE=12 read as processes (--platform-world-size procs) needs a "
        "number of ranks per node to count the nodes, not --nproc-per-node auto (fix: give "
        "--nproc-per-node N, or --nnodes N)");
  EnvMap pet = env;
  pet.Set("PET_PLATFORM_WORLD_SIZE", "procs");
  pet.Set("PET_NPROC_PER_NODE", "5");
  CHECK(f.Err(pet) ==
        "gculaunch: WORLD_SIZE=12 read as processes is not a multiple of PET_NPROC_PER_NODE=5 "
        "(read as nodes it would be 12 nodes) (fix: check PET_NPROC_PER_NODE, or use "
        "--platform-world-size nodes if WORLD_SIZE counts nodes)");
  EnvMap big = NodeEnv({{"WORLD_SIZE", "12"}, {"RANK", "3"}, {"MASTER_ADDR", "node0"}});
  CHECK(f.Err(big, {"--platform-world-size", "procs", "--nproc-per-node", "4"}) ==
        "gculaunch: RANK=3 is not a node of this job: WORLD_SIZE=12 (processes, 4 per node) "
        "gives node ranks 0 to 2 (fix: check RANK, WORLD_SIZE and --nproc-per-node)");
  LaunchSpec ok = f.Spec(big, {"--platform-world-size", "procs", "--nproc-per-node", "3"});
  CHECK(ok.nnodes == 4);
  CHECK(ok.world_size == 12);
  CHECK(ok.rank_offset == 9);
}

TEST_CASE("platform: Slurm errors", "[platform]") {
  Fixture f;
  auto step = [](std::initializer_list<std::pair<const std::string, std::string>> vars) {
    EnvMap out = NodeEnv({{"SLURM_JOB_ID", "77"},
                          {"SLURM_STEP_ID", "0"},
                          {"SLURM_PROCID", "1"},
                          {"SLURM_STEP_NUM_TASKS", "2"},
                          {"SLURM_STEP_NUM_NODES", "2"},
                          {"SLURM_STEP_NODELIST", "gcu[01-02]"}});
    for (const auto& [key, value] : vars) {
      if (value.empty()) {
        out.Erase(key);
      } else {
        out.Set(key, value);
      }
    }
    return out;
  };
  REQUIRE(f.Spec(step({})).master_addr == "gcu01");
  CHECK(f.Err(step({{"SLURM_STEP_NUM_TASKS", "16"}})) ==
        "gculaunch: srun started 16 tasks on 2 nodes (SLURM_STEP_NUM_TASKS=16, "
        "SLURM_STEP_NUM_NODES=2), but gculaunch runs once per node (fix: srun "
        "--ntasks-per-node=1 gculaunch ... (gculaunch starts each node's ranks itself))");
  CHECK(f.Err(step({{"SLURM_STEP_NUM_TASKS", ""}})) ==
        "gculaunch: SLURM_STEP_ID is set but neither SLURM_STEP_NUM_TASKS nor SLURM_NTASKS is: "
        "gculaunch cannot tell how many nodes run the step (fix: start gculaunch with srun "
        "--ntasks-per-node=1, or give --nnodes N)");
  CHECK(f.Err(step({{"SLURM_STEP_NUM_TASKS", "x"}})) ==
        "gculaunch: SLURM_STEP_NUM_TASKS 'x': expected the number of tasks in the step (fix: "
        "start gculaunch with srun --ntasks-per-node=1, or give --nnodes N)");
  CHECK(f.Err(step({{"SLURM_STEP_NUM_NODES", "two"}})) ==
        "gculaunch: SLURM_STEP_NUM_NODES 'two': expected the number of nodes in the step (fix: "
        "start gculaunch with srun --ntasks-per-node=1, or give --nnodes N)");
  CHECK(f.Err(step({{"SLURM_PROCID", ""}})) ==
        "gculaunch: SLURM_STEP_ID is set but SLURM_PROCID is not: gculaunch cannot tell which "
        "node this is (fix: start gculaunch with srun --ntasks-per-node=1, or give --node-rank "
        "N)");
  CHECK(f.Err(step({{"SLURM_PROCID", "one"}})) ==
        "gculaunch: SLURM_PROCID 'one': expected this task's index, an integer from 0 (fix: "
        "start gculaunch with srun --ntasks-per-node=1, or give --node-rank N)");
  CHECK(f.Err(step({{"SLURM_PROCID", "2"}})) ==
        "gculaunch: SLURM_PROCID=2 is not a node of this job: SLURM_STEP_NUM_TASKS=2 gives node "
        "ranks 0 to 1 (fix: check SLURM_PROCID and SLURM_STEP_NUM_TASKS)");
  CHECK(f.Err(step({{"SLURM_STEP_NODELIST", "gcu[01-02"}})) ==
        "gculaunch: SLURM_STEP_NODELIST 'gcu[01-02': unclosed '[' (fix: give --master-addr HOST "
        "(the host of SLURM_PROCID 0))");
  CHECK(f.Err(step({{"SLURM_STEP_NODELIST", "gcu[01-03]"}})) ==
        "gculaunch: SLURM_STEP_NODELIST 'gcu[01-03]' names 3 hosts but SLURM_STEP_NUM_NODES=2 "
        "(fix: give --master-addr HOST (the host of SLURM_PROCID 0))");
  CHECK(f.Err(step({{"SLURM_STEP_NODELIST", ""}})) ==
        "gculaunch: the job has 2 nodes (SLURM_STEP_NUM_TASKS=2) but neither "
        "SLURM_STEP_NODELIST nor SLURM_JOB_NODELIST is set to name the master (fix: give "
        "--master-addr HOST (the host of SLURM_PROCID 0))");
  CHECK(f.Err(step({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "1"}})) ==
        "gculaunch: the Slurm step (SLURM_PROCID=1, SLURM_STEP_NUM_TASKS=2) and Open MPI "
        "(OMPI_COMM_WORLD_RANK=1, OMPI_COMM_WORLD_SIZE=4) disagree about this node (fix: start "
        "gculaunch with srun --ntasks-per-node=1 rather than mpirun inside a Slurm allocation, "
        "or give --nnodes and --node-rank)");
  // With flags for everything, the step's variables are not read at all.
  CHECK(f.Spec(step({{"SLURM_STEP_NUM_NODES", "two"}, {"SLURM_STEP_NODELIST", "gcu[01"}}),
               {"--nnodes", "2", "--node-rank", "1", "--master-addr", "gcu01"})
            .node_rank == 1);
  // A flag for the master makes the node list irrelevant.
  CHECK(f.Spec(step({{"SLURM_STEP_NODELIST", "gcu[01-02"}}), {"--master-addr", "gcu01-ib"})
            .master_addr == "gcu01-ib");
}

TEST_CASE("platform: Open MPI errors", "[platform]") {
  Fixture f;
  auto mpi = [](std::initializer_list<std::pair<const std::string, std::string>> vars) {
    EnvMap out = NodeEnv({{"OMPI_COMM_WORLD_SIZE", "2"},
                          {"OMPI_COMM_WORLD_RANK", "1"},
                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"},
                          {"MASTER_ADDR", "node0"}});
    for (const auto& [key, value] : vars) {
      if (value.empty()) {
        out.Erase(key);
      } else {
        out.Set(key, value);
      }
    }
    return out;
  };
  REQUIRE(f.Spec(mpi({})).node_rank == 1);
  CHECK(f.Err(mpi({{"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}})) ==
        "gculaunch: mpirun started 2 copies of gculaunch on this node "
        "(OMPI_COMM_WORLD_LOCAL_SIZE=2), but gculaunch runs once per node (fix: mpirun "
        "--map-by ppr:1:node gculaunch ... (gculaunch starts each node's ranks itself))");
  CHECK(f.Err(mpi({{"MASTER_ADDR", ""}})) ==
        "gculaunch: the job has 2 nodes (OMPI_COMM_WORLD_SIZE=2) but MASTER_ADDR is not set to "
        "name the master (fix: pass node 0's address to every copy (mpirun -x MASTER_ADDR=HOST "
        "...), or give --master-addr HOST)");
  CHECK(f.Err(mpi({{"OMPI_COMM_WORLD_SIZE", ""}})) ==
        "gculaunch: OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not (fix: start "
        "gculaunch with mpirun --map-by ppr:1:node)");
  CHECK(f.Err(mpi({{"OMPI_COMM_WORLD_SIZE", "2.0"}})) ==
        "gculaunch: OMPI_COMM_WORLD_SIZE '2.0': expected the number of copies started (fix: "
        "start gculaunch with mpirun --map-by ppr:1:node, or give --nnodes N)");
  CHECK(f.Err(mpi({{"OMPI_COMM_WORLD_RANK", "2"}})) ==
        "gculaunch: OMPI_COMM_WORLD_RANK=2 is not a node of this job: OMPI_COMM_WORLD_SIZE=2 "
        "gives node ranks 0 to 1 (fix: check OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE)");
  // One copy needs no master address.
  LaunchSpec single = f.Spec(
      mpi({{"OMPI_COMM_WORLD_SIZE", "1"}, {"OMPI_COMM_WORLD_RANK", "0"}, {"MASTER_ADDR", ""}}));
  CHECK(single.master_addr == "127.0.0.1");
}

TEST_CASE("platform: --platform-world-size on the command line", "[platform][cli]") {
  const EnvMap env = NodeEnv({});
  for (const std::string flag : {"--platform-world-size", "--platform_world_size"}) {
    auto cli = ParseCli({flag, "procs", "x.py"}, env);
    REQUIRE(cli.ok());
    CHECK(cli->options.platform_world_size == PlatformWorldSize::kProcs);
    CHECK(cli->options.Source("platform-world-size") == "--platform-world-size");
  }
  auto equals = ParseCli({"--platform-world-size=nodes", "x.py"}, env);
  REQUIRE(equals.ok());
  CHECK(equals->options.platform_world_size == PlatformWorldSize::kNodes);
  auto pet = ParseCli({"x.py"}, NodeEnv({{"PET_PLATFORM_WORLD_SIZE", "procs"}}));
  REQUIRE(pet.ok());
  CHECK(pet->options.platform_world_size == PlatformWorldSize::kProcs);
  auto bad = ParseCli({"--platform-world-size", "pods", "x.py"}, env);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().Format() ==
        "gculaunch: --platform-world-size 'pods': expected nodes or procs (fix: e.g. "
        "--platform-world-size procs)");
  auto bad_pet = ParseCli({"x.py"}, NodeEnv({{"PET_PLATFORM_WORLD_SIZE", "gpus"}}));
  REQUIRE_FALSE(bad_pet.ok());
  CHECK(bad_pet.error().Format() ==
        "gculaunch: PET_PLATFORM_WORLD_SIZE 'gpus': expected nodes or procs (fix: e.g. "
        "PET_PLATFORM_WORLD_SIZE=procs)");
}

}  // namespace
}  // namespace gculaunch
