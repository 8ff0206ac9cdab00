#include "launcher/frontend/rank_env.h"

#include <catch2/catch.hpp>

#include "launcher/frontend/launch_spec.h"
#include "launcher/frontend/python_shim.h"
#include "launcher/frontend/stack_hook.h"

namespace gculaunch {
namespace {

// A GCU node: 2 nodes x 4 ranks, this is node 1, pool from TOPS_VISIBLE_DEVICES.
LaunchSpec GcuSpec() {
  LaunchSpec spec;
  spec.nnodes = 2;
  spec.node_rank = 1;
  spec.nproc_per_node = 4;
  spec.rank_offset = 4;
  spec.world_size = 8;
  spec.master_addr = "node0";
  spec.master_port = 29500;
  spec.run_id = "job7";
  spec.max_restarts = 3;
  spec.argv = {"/usr/bin/python3", "-u", "train.py", "--out=run${local_rank}", "${local_rank}"};
  spec.profile = *FindBuiltinProfile("gcu");
  spec.device_pool = {"4", "5", "6", "7"};
  spec.omp_num_threads_default = "1";
  spec.ranks_torch = RanksTorch{RanksTorch::State::kFound, "1.10.0", ""};  // torch_gcu's
  return spec;
}

const RankRuntime kRuntime{"29500", "job7", "/logs/job7"};

TEST_CASE("rank env: the complete environment of a GCU rank", "[rank_env]") {
  const EnvMap base{{"PATH", "/usr/bin"},
                    {"HOME", "/root"},
                    {"RANK", "1"},
                    {"WORLD_SIZE", "2"},
                    {"TOPS_VISIBLE_DEVICES", "4,5,6,7"}};
  const EnvMap env = BuildRankEnv(GcuSpec(), base, /*local_rank=*/2, /*restart_count=*/1, kRuntime);
  const EnvMap expected{
      {"PATH", "/usr/bin"},
      {"HOME", "/root"},
      {"ECCL_MAX_NCHANNELS", "2"},
      {"ECCL_RUNTIME_3_0_ENABLE", "true"},
      {"NCCL_ASYNC_ERROR_HANDLING", "1"},  // torch 1.10's name only
      {"PYTHONUNBUFFERED", "1"},
      {"PYTHONFAULTHANDLER", "1"},
      {"OMP_NUM_THREADS", "1"},
      {"LOCAL_RANK", "2"},
      {"RANK", "6"},
      {"GROUP_RANK", "1"},
      {"ROLE_RANK", "6"},
      {"ROLE_NAME", "default"},
      {"LOCAL_WORLD_SIZE", "4"},
      {"WORLD_SIZE", "8"},
      {"GROUP_WORLD_SIZE", "2"},
      {"ROLE_WORLD_SIZE", "8"},
      {"MASTER_ADDR", "node0"},
      {"MASTER_PORT", "29500"},
      {"TORCHELASTIC_RESTART_COUNT", "1"},
      {"TORCHELASTIC_MAX_RESTARTS", "3"},
      {"TORCHELASTIC_RUN_ID", "job7"},
      {"TORCHELASTIC_USE_AGENT_STORE", "True"},
      {"TORCHELASTIC_ERROR_FILE", "/logs/job7/attempt_1/2/error.json"},
      {"TOPS_VISIBLE_DEVICES", "4,5,6,7"},
      {"ENFLAME_VISIBLE_DEVICES", "4,5,6,7"},
      {"GCULAUNCH_DEVICE", "6"},
      {"GCULAUNCH_DEVICE_INDEX", "2"},
      {"GCULAUNCH_BACKEND", "eccl"},
  };
  CHECK(env == expected);
}

TEST_CASE("rank env: the complete environment of a CPU --standalone rank", "[rank_env]") {
  LaunchSpec spec;
  spec.nproc_per_node = 4;
  spec.world_size = 4;
  spec.master_port = 0;
  spec.standalone = true;
  spec.profile = *FindBuiltinProfile("cpu");
  spec.omp_num_threads_default = "1";
  const EnvMap base{{"PATH", "/usr/bin"}, {"OMP_NUM_THREADS", "2"}};
  const EnvMap env = BuildRankEnv(spec, base, 3, 0, RankRuntime{"41000", "f00d", "/scratch/s"});
  const EnvMap expected{
      {"PATH", "/usr/bin"},
      {"OMP_NUM_THREADS", "2"},
      // The ranks' torch is not known (spec.ranks_torch): both names.
      {"NCCL_ASYNC_ERROR_HANDLING", "1"},
      {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
      {"PYTHONUNBUFFERED", "1"},
      {"PYTHONFAULTHANDLER", "1"},
      {"LOCAL_RANK", "3"},
      {"RANK", "3"},
      {"GROUP_RANK", "0"},
      {"ROLE_RANK", "3"},
      {"ROLE_NAME", "default"},
      {"LOCAL_WORLD_SIZE", "4"},
      {"WORLD_SIZE", "4"},
      {"GROUP_WORLD_SIZE", "1"},
      {"ROLE_WORLD_SIZE", "4"},
      {"MASTER_ADDR", "127.0.0.1"},
      {"MASTER_PORT", "41000"},
      {"TORCHELASTIC_RESTART_COUNT", "0"},
      {"TORCHELASTIC_MAX_RESTARTS", "0"},
      {"TORCHELASTIC_RUN_ID", "f00d"},
      {"TORCHELASTIC_USE_AGENT_STORE", "True"},
      {"TORCHELASTIC_ERROR_FILE", "/scratch/s/attempt_0/3/error.json"},
      {"GCULAUNCH_BACKEND", "gloo"},
  };
  CHECK(env == expected);
}

TEST_CASE("rank env: PYTHONFAULTHANDLER=1 unless the user set it or opted out", "[rank_env]") {
  LaunchSpec spec = GcuSpec();
  CHECK(BuildRankEnv(spec, EnvMap{}, 0, 0, kRuntime).GetOr("PYTHONFAULTHANDLER", "") == "1");
  // Any value of the user's counts, even an empty one (Python then leaves it off).
  for (const char* value : {"", "0", "yes"}) {
    const EnvMap base{{"PYTHONFAULTHANDLER", value}};
    CHECK(BuildRankEnv(spec, base, 0, 0, kRuntime).GetOr("PYTHONFAULTHANDLER", "?") == value);
  }
  spec.extra_env = {{"PYTHONFAULTHANDLER", "0"}};  // --env wins as for every default
  CHECK(BuildRankEnv(spec, EnvMap{}, 0, 0, kRuntime).GetOr("PYTHONFAULTHANDLER", "") == "0");
  spec.extra_env.clear();
  spec.python_faulthandler = false;  // --no-python-faulthandler
  CHECK_FALSE(BuildRankEnv(spec, EnvMap{}, 0, 0, kRuntime).Has("PYTHONFAULTHANDLER"));
  CHECK(BuildRankEnv(spec, EnvMap{{"PYTHONFAULTHANDLER", "1"}}, 0, 0, kRuntime)
            .GetOr("PYTHONFAULTHANDLER", "") == "1");
}

TEST_CASE("rank env: --bind rank gives each rank its own card", "[rank_env]") {
  LaunchSpec spec = GcuSpec();
  spec.bind = DeviceBind::kRank;
  for (int local_rank = 0; local_rank < 4; ++local_rank) {
    const EnvMap env = BuildRankEnv(spec, {}, local_rank, 0, kRuntime);
    const std::string card = spec.device_pool[local_rank];
    CHECK(env.Get("TOPS_VISIBLE_DEVICES") == card);
    CHECK(env.Get("ENFLAME_VISIBLE_DEVICES") == card);
    CHECK(env.Get("GCULAUNCH_DEVICE") == card);
    CHECK(env.Get("GCULAUNCH_DEVICE_INDEX") == "0");
    CHECK(env.Get("LOCAL_RANK") == std::to_string(local_rank));  // never rewritten
  }
  // Only a dry run can ask for a rank beyond the pool; it shows a placeholder.
  spec.nproc_per_node = 5;
  CHECK(BuildRankEnv(spec, {}, 4, 0, kRuntime).Get("TOPS_VISIBLE_DEVICES") ==
        "<no card left in the pool>");
}

TEST_CASE("rank env: --bind all with more ranks than cards shares them round-robin", "[rank_env]") {
  LaunchSpec spec = GcuSpec();
  spec.device_pool = {"0", "1"};
  const EnvMap env = BuildRankEnv(spec, {}, 3, 0, kRuntime);
  CHECK(env.Get("TOPS_VISIBLE_DEVICES") == "0,1");
  CHECK(env.Get("GCULAUNCH_DEVICE") == "1");
  CHECK(env.Get("GCULAUNCH_DEVICE_INDEX") == "1");
}

TEST_CASE("rank env: layering profile < user environment < --env < gculaunch", "[rank_env]") {
  LaunchSpec spec = GcuSpec();
  spec.extra_env = {{"ECCL_DEBUG", "INFO"}, {"SHARED", "from --env"}, {"OMP_NUM_THREADS", "5"}};
  const EnvMap base{{"ECCL_MAX_NCHANNELS", "4"},  // the user's value beats the profile's
                    {"SHARED", "from user"},
                    {"NCCL_ASYNC_ERROR_HANDLING", "0"},
                    {"PYTHONUNBUFFERED", "0"},
                    {"LOCAL_RANK", "9"},  // gculaunch's own variables always win
                    {"ENFLAME_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7"},
                    {"GCULAUNCH_BACKEND", "outer"}};
  const EnvMap env = BuildRankEnv(spec, base, 0, 0, kRuntime);
  CHECK(env.Get("ECCL_MAX_NCHANNELS") == "4");
  CHECK(env.Get("ECCL_RUNTIME_3_0_ENABLE") == "true");
  CHECK(env.Get("ECCL_DEBUG") == "INFO");
  CHECK(env.Get("SHARED") == "from --env");
  CHECK(env.Get("OMP_NUM_THREADS") == "5");
  CHECK(env.Get("NCCL_ASYNC_ERROR_HANDLING") == "0");
  CHECK_FALSE(env.Has("TORCH_NCCL_ASYNC_ERROR_HANDLING"));  // torch 1.10 knows only the old name
  CHECK(env.Get("PYTHONUNBUFFERED") == "0");
  CHECK(env.Get("LOCAL_RANK") == "0");
  CHECK(env.Get("ENFLAME_VISIBLE_DEVICES") == "4,5,6,7");
  CHECK(env.Get("GCULAUNCH_BACKEND") == "eccl");
}

TEST_CASE("rank env: the etcd password never reaches a rank", "[rank_env]") {
  const auto rdzv_conf = [](const std::string& value) {
    const EnvMap base{{"PATH", "/usr/bin"}, {"PET_RDZV_CONF", value}};
    return BuildRankEnv(GcuSpec(), base, 0, 0, kRuntime).Get("PET_RDZV_CONF");
  };
  SECTION("GCULAUNCH_ETCD_PASSWORD is gculaunch's own, also when --env names it") {
    LaunchSpec spec = GcuSpec();
    spec.extra_env = {{"GCULAUNCH_ETCD_PASSWORD", "s3cret"}};
    const EnvMap base{{"PATH", "/usr/bin"}, {"GCULAUNCH_ETCD_PASSWORD", "s3cret"}};
    const EnvMap env = BuildRankEnv(spec, base, 0, 0, kRuntime);
    CHECK_FALSE(env.Has("GCULAUNCH_ETCD_PASSWORD"));
    CHECK(env.GetOr("PATH", "") == "/usr/bin");
  }
  SECTION("password= is cut out of PET_RDZV_CONF, the other items stay") {
    CHECK(rdzv_conf("user=root,password=s3cret,lease_ttl=5") == "user=root,lease_ttl=5");
    CHECK(rdzv_conf("password=s3cret,user=root") == "user=root");
    // A password holding ',' (pieces without '=') or ',' and '=' (an unknown key).
    CHECK(rdzv_conf("user=root,password=a,b,c,timeout=9") == "user=root,timeout=9");
    CHECK(rdzv_conf("user=root,password=a,b=c") == "user=root");
    CHECK(rdzv_conf("join_timeout=900") == "join_timeout=900");
    CHECK(rdzv_conf("password_file=/run/pw,user=u") == "password_file=/run/pw,user=u");
  }
  SECTION("nothing left: no PET_RDZV_CONF at all") { CHECK_FALSE(rdzv_conf("password=s3cret")); }
}

TEST_CASE("rank env: a CPU launch with rank 0 hosting the store", "[rank_env]") {
  LaunchSpec spec;
  spec.nproc_per_node = 2;
  spec.world_size = 2;
  spec.profile = *FindBuiltinProfile("cpu");
  spec.store_mode = StoreMode::kRank0;
  spec.role = "trainer";
  const EnvMap base{
      {"GCULAUNCH_DEVICE", "3"}, {"GCULAUNCH_DEVICE_INDEX", "3"}, {"CUDA_VISIBLE_DEVICES", "1"}};
  const EnvMap env = BuildRankEnv(spec, base, 1, 0, RankRuntime{"41234", "abc", "/scratch/r"});
  CHECK(env.Get("TORCHELASTIC_USE_AGENT_STORE") == "False");
  CHECK(env.Get("MASTER_PORT") == "41234");
  CHECK(env.Get("ROLE_NAME") == "trainer");
  CHECK(env.Get("GCULAUNCH_BACKEND") == "gloo");
  CHECK_FALSE(env.Has("GCULAUNCH_DEVICE"));  // no cards: an outer launch's value is dropped
  CHECK_FALSE(env.Has("GCULAUNCH_DEVICE_INDEX"));
  CHECK_FALSE(env.Has("OMP_NUM_THREADS"));        // spec has no default
  CHECK(env.Get("CUDA_VISIBLE_DEVICES") == "1");  // not the cpu profile's variable
  CHECK(env.Get("TORCHELASTIC_ERROR_FILE") == "/scratch/r/attempt_0/1/error.json");
}

TEST_CASE("rank env: argv substitutes ${local_rank} after argv(0), as torchrun does",
          "[rank_env]") {
  LaunchSpec spec = GcuSpec();
  CHECK(BuildRankArgv(spec, 3) ==
        std::vector<std::string>{"/usr/bin/python3", "-u", "train.py", "--out=run3", "3"});
  // Python's string.Template.safe_substitute(local_rank=...) rules.
  spec.argv = {"/bin/${local_rank}",
               "--local_rank=${local_rank}",
               "${local_rank}${local_rank}",
               "${local_rank_x}",
               "$local_rank",
               "$local_rank.log",
               "$local_rankx",
               "$$",
               "$5",
               "a$",
               "${unclosed",
               "$LOCAL_RANK",
               "${other}"};
  CHECK(BuildRankArgv(spec, 12) ==
        std::vector<std::string>{"/bin/${local_rank}", "--local_rank=12", "1212", "${local_rank_x}",
                                 "12", "12.log", "$local_rankx", "$", "$5", "a$", "${unclosed",
                                 "$LOCAL_RANK", "${other}"});
}

TEST_CASE("rank env: the console prefix, default or torch's template", "[rank_env]") {
  LaunchSpec spec = GcuSpec();  // ranks 4..7
  spec.role = "trainer";
  CHECK(ConsolePrefix(spec, 2) == "[rank6]: ");
  // Python's Template(...).safe_substitute(role_name=, rank=, local_rank=), as torch calls it
  // (each expected value is what Python 3.11 gives).
  const std::pair<std::string, std::string> cases[] = {
      {"[${role_name}-r${rank}]:", "[trainer-r6]:"},
      {"$rank|${local_rank}|$$|${rankx}|$rank_x|$rank.x|${ rank}|$",
       "6|2|$|${rankx}|$rank_x|6.x|${ rank}|$"},
      {"no placeholder: ", "no placeholder: "},
      {"${RANK}$Rank", "${RANK}$Rank"},
  };
  for (const auto& [tmpl, expected] : cases) {
    INFO(tmpl);
    spec.log_line_prefix_template = tmpl;
    CHECK(ConsolePrefix(spec, 2) == expected);
  }
}

TEST_CASE("rank env: error files and the launch's runtime values", "[rank_env]") {
  CHECK(RankErrorFile({"1", "r", "/d"}, 2, 5) == "/d/attempt_2/5/error.json");

  LaunchSpec spec = GcuSpec();
  const LaunchChoices choices{"40000", "generated", "/scratch/gculaunch_x"};
  RankRuntime fixed = ResolveRankRuntime(spec, choices);
  CHECK(fixed.master_port == "29500");
  CHECK(fixed.run_id == "job7");
  CHECK(fixed.rank_file_root == "/scratch/gculaunch_x");

  spec.master_port = 0;
  spec.run_id.clear();
  spec.log_dir = "/logs";
  RankRuntime chosen = ResolveRankRuntime(spec, choices);
  CHECK(chosen.master_port == "40000");
  CHECK(chosen.run_id == "generated");
  // Files the ranks open by name never go under --log-dir (another user may control it).
  CHECK(chosen.rank_file_root == "/scratch/gculaunch_x");
  CHECK(chosen.log_root == "/logs/generated_<random>");  // the launch makes it (launch.cc)
  CHECK(fixed.log_root.empty());
}

TEST_CASE("rank env: owned variables include the profile's visible-devices variables",
          "[rank_env]") {
  auto owned = OwnedRankVariables(*FindBuiltinProfile("gcu"));
  for (const char* var : {"LOCAL_RANK",
                          "RANK",
                          "GROUP_RANK",
                          "ROLE_RANK",
                          "ROLE_NAME",
                          "LOCAL_WORLD_SIZE",
                          "WORLD_SIZE",
                          "GROUP_WORLD_SIZE",
                          "ROLE_WORLD_SIZE",
                          "MASTER_ADDR",
                          "MASTER_PORT",
                          "TORCHELASTIC_RESTART_COUNT",
                          "TORCHELASTIC_MAX_RESTARTS",
                          "TORCHELASTIC_RUN_ID",
                          "TORCHELASTIC_USE_AGENT_STORE",
                          "TORCHELASTIC_ERROR_FILE",
                          "GCULAUNCH_DEVICE",
                          "GCULAUNCH_DEVICE_INDEX",
                          "GCULAUNCH_BACKEND",
                          "GCULAUNCH_CPUS",
                          "TOPS_VISIBLE_DEVICES",
                          "ENFLAME_VISIBLE_DEVICES"}) {
    INFO(var);
    CHECK(std::find(owned.begin(), owned.end(), var) != owned.end());
  }
  for (const std::string& var : PythonShimVariables()) {
    INFO(var);
    CHECK(std::find(owned.begin(), owned.end(), var) != owned.end());
  }
  for (const std::string& var : StackHookVariables()) {
    INFO(var);
    CHECK(std::find(owned.begin(), owned.end(), var) != owned.end());
  }
  const size_t hooks = PythonShimVariables().size() + StackHookVariables().size();
  CHECK(owned.size() == 22 + hooks);
  CHECK(OwnedRankVariables(*FindBuiltinProfile("cpu")).size() == 20 + hooks);
}

}  // namespace
}  // namespace gculaunch
