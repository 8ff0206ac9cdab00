#include "launcher/frontend/launch_spec.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>

#include "launcher/frontend/cli.h"
#include "launcher/frontend/dry_run.h"
#include "launcher/frontend/rank_env.h"
#include "launcher/sys/device_probe.h"
#include "launcher/sys/local_files.h"
#include "tests/support/frontend_fakes.h"

namespace gculaunch {
namespace {

using testing::FakeDeviceProbe;
using testing::FakeFileAccess;

struct Fixture {
  FakeDeviceProbe probe;
  FakeFileAccess files;
  EnvMap env{{"PATH", "/usr/bin:/bin"}, {"HOME", "/home/u"}};
  PlatformInfo platform;

  Fixture() { files.executables["python3"] = "/usr/bin/python3"; }

  Result<LaunchSpec> Make(const std::vector<std::string>& args) {
    auto cli = ParseCli(args, env);
    if (!cli.ok()) FAIL(cli.error().Format());
    return MakeLaunchSpec(cli->options, env, probe, files, platform);
  }
  LaunchSpec Spec(const std::vector<std::string>& args) {
    auto spec = Make(args);
    if (!spec.ok()) FAIL(spec.error().Format());
    return std::move(*spec);
  }
  std::string Err(const std::vector<std::string>& args) {
    auto spec = Make(args);
    REQUIRE_FALSE(spec.ok());
    return spec.error().Format();
  }
};

bool HasNote(const LaunchSpec& spec, const std::string& note) {
  return std::find(spec.notes.begin(), spec.notes.end(), note) != spec.notes.end();
}

bool HasWarning(const LaunchSpec& spec, const std::string& warning) {
  return std::find(spec.warnings.begin(), spec.warnings.end(), warning) != spec.warnings.end();
}

std::string Notes(const LaunchSpec& spec) {
  std::string out;
  for (const std::string& note : spec.notes) out += note + "\n";
  return out;
}

TEST_CASE("launch spec: defaults are torchrun's", "[launch_spec]") {
  Fixture f;
  LaunchSpec s = f.Spec({"train.py", "cfg.py"});
  CHECK(s.nnodes == 1);
  CHECK(s.node_rank == 0);
  CHECK(s.nproc_per_node == 1);
  CHECK(s.rank_offset == 0);
  CHECK(s.world_size == 1);
  CHECK(s.master_addr == "127.0.0.1");
  CHECK(s.master_port == 29500);
  CHECK_FALSE(s.standalone);
  CHECK(s.role == "default");
  CHECK(s.run_id == "none");
  CHECK(s.max_restarts == 0);
  CHECK(s.store_mode == StoreMode::kAgent);
  CHECK(s.profile.name == "cpu");
  CHECK(s.device_pool.empty());
  CHECK(s.bind == DeviceBind::kAll);
  CHECK(s.argv == std::vector<std::string>{"/usr/bin/python3", "-u", "train.py", "cfg.py"});
  CHECK(s.executable == "/usr/bin/python3");
  CHECK(s.python == "/usr/bin/python3");
  CHECK(s.omp_num_threads_default.empty());
  CHECK(s.grace_period_s == 25.0);
  CHECK(s.stdin_mode == StdinMode::kNull);
  CHECK_FALSE(s.dry_run);
  CHECK(s.dry_run_format == DryRunFormat::kTable);
  CHECK(f.files.last_path_var == "/usr/bin:/bin");
  CHECK(Notes(s) ==
        "device cpu: --device auto found no accelerator device files\n"
        "interpreter /usr/bin/python3 (python3 on PATH)\n");
}

TEST_CASE("launch spec: topology across nodes", "[launch_spec]") {
  Fixture f;
  LaunchSpec s = f.Spec({"--nnodes", "2:2", "--node-rank", "1", "--nproc-per-node", "4",
                         "--master-addr", "node0", "--master-port", "29511", "--role", "trainer",
                         "--max-restarts", "2", "--run-id", "job1", "x.py"});
  CHECK(s.nnodes == 2);
  CHECK(s.node_rank == 1);
  CHECK(s.nproc_per_node == 4);
  CHECK(s.rank_offset == 4);
  CHECK(s.world_size == 8);
  CHECK(s.master_addr == "node0");
  CHECK(s.master_port == 29511);
  CHECK(s.role == "trainer");
  CHECK(s.max_restarts == 2);
  CHECK(s.run_id == "job1");
  CHECK(f.Spec({"--rdzv-id", "job2", "x.py"}).run_id == "job2");
  CHECK(f.Spec({"--rdzv-id", "job3", "--run-id", "job3", "x.py"}).run_id == "job3");
}

TEST_CASE("launch spec: --standalone", "[launch_spec]") {
  Fixture f;
  LaunchSpec s = f.Spec({"--standalone", "--nproc-per-node", "2", "x.py"});
  CHECK(s.standalone);
  CHECK(s.master_addr == "127.0.0.1");
  CHECK(s.master_port == 0);
  CHECK(s.run_id.empty());
  CHECK(HasNote(s, "run id generated at launch (--standalone without --run-id)"));
  CHECK(HasNote(s, "master port chosen at launch: gculaunch binds a free port for its store"));

  // The users' own torchrun line combines --standalone with a master address and port.
  LaunchSpec seed = f.Spec({"--standalone", "--nnodes=1", "--nproc_per_node=8",
                            "--master_addr=10.1.1.1", "--master_port=29500", "x.py"});
  CHECK(seed.master_addr == "127.0.0.1");
  CHECK(seed.master_port == 29500);
  CHECK(HasNote(seed, "--master-addr is ignored with --standalone: the store is on 127.0.0.1"));
  CHECK(f.Spec({"--standalone", "--run-id", "r1", "x.py"}).run_id == "r1");
}

TEST_CASE("launch spec: --rdzv-endpoint names the store", "[launch_spec]") {
  Fixture f;
  LaunchSpec s = f.Spec({"--rdzv-endpoint", "[fd00::1]:29402", "--rdzv-backend", "c10d", "x.py"});
  CHECK(s.master_addr == "fd00::1");
  CHECK(s.master_port == 29402);
  LaunchSpec no_port = f.Spec({"--rdzv-endpoint", "node0", "x.py"});
  CHECK(no_port.master_addr == "node0");
  CHECK(no_port.master_port == 29400);
  CHECK(HasNote(no_port, "--rdzv-endpoint has no port: using 29400 (torchrun's default)"));

  // From the environment (a platform sets both), the endpoint wins, as in torchrun.
  f.env.Set("PET_MASTER_ADDR", "other");
  LaunchSpec mixed = f.Spec({"--rdzv-endpoint", "node0:29401", "x.py"});
  CHECK(mixed.master_addr == "node0");
  CHECK(mixed.master_port == 29401);
  CHECK(HasNote(mixed,
                "PET_MASTER_ADDR=other is ignored: --rdzv-endpoint node0:29401 names the store "
                "(as torchrun does)"));
}

// accelerate's and many Kubernetes recipes' line: --rdzv-backend c10d, a fixed --nnodes, no
// node rank: the rendezvous assigns the node ranks (MIN = MAX), the endpoint's host hosts the
// store unless --rdzv-conf is_host says.
TEST_CASE("launch spec: c10d without a node rank assigns node ranks at rendezvous",
          "[launch_spec]") {
  Fixture f;
  const std::vector<std::string> line = {
      "--nnodes",        "2",           "--nproc_per_node", "8",   "--rdzv_backend", "c10d",
      "--rdzv_endpoint", "node0:29400", "--rdzv_id",        "job7"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = line;
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back("train.py");
    return args;
  };
  LaunchSpec s = f.Spec(with({}));
  CHECK(s.node_rank_at_rendezvous());
  CHECK_FALSE(s.elastic());
  CHECK(s.min_nodes == 2);
  CHECK_FALSE(s.store_host.has_value());
  CHECK(s.layout ==
        "layout: 2 nodes x 8 ranks, node rank assigned at rendezvous, the node the endpoint names "
        "hosts the store, master node0:29400 (from --nnodes 2, --rdzv-endpoint)");
  CHECK(Notes(s).find("node rank: assigned at rendezvous") != std::string::npos);

  LaunchSpec host = f.Spec(with({"--rdzv-conf", "is_host=True"}));
  CHECK(host.store_host == true);
  CHECK(host.node_rank == 0);
  CHECK(host.layout.find("this node hosts the store (--rdzv-conf is_host=True)") !=
        std::string::npos);
  LaunchSpec client = f.Spec(with({"--rdzv-conf", "is_host=no"}));
  CHECK(client.store_host == false);
  CHECK(client.node_rank == 1);
  CHECK_FALSE(ParseCli(with({"--rdzv-conf", "is_host=maybe"}), f.env).ok());
  CHECK(f.Spec(with({"--rdzv-conf", "is_host=Y"})).store_host == true);
  CHECK(f.Spec(with({"--rdzv-conf", "is_host=0"})).store_host == false);

  // A node rank given is kept (torchrun ignores it with c10d), with a note.
  LaunchSpec ranked = f.Spec(with({"--node-rank", "1"}));
  CHECK_FALSE(ranked.node_rank_at_rendezvous());
  CHECK(ranked.node_rank == 1);
  CHECK(ranked.rank_offset == 8);
  CHECK(HasNote(ranked,
                "--node-rank 1 is kept with --rdzv-backend c10d: this node is node rank 1 "
                "(torchrun ignores a node rank with c10d and assigns them at rendezvous; leave "
                "it out for that)"));
  // The static backend (torchrun's default) has no rendezvous to assign them: node 0.
  LaunchSpec fixed = f.Spec({"--nnodes", "2", "--rdzv-endpoint", "node0:29400", "x.py"});
  CHECK_FALSE(fixed.node_rank_at_rendezvous());
  CHECK(fixed.node_rank == 0);
}

TEST_CASE("launch spec: --rdzv-endpoint wins over --master-addr/--master-port, as in torchrun",
          "[launch_spec]") {
  Fixture f;
  LaunchSpec both = f.Spec({"--rdzv-endpoint", "node0:29401", "--master-addr", "node1",
                            "--master-port", "29555", "x.py"});
  CHECK(both.master_addr == "node0");
  CHECK(both.master_port == 29401);
  CHECK(HasNote(both,
                "--master-addr node1 and --master-port 29555 are ignored: --rdzv-endpoint "
                "node0:29401 names the store (as torchrun does)"));
  LaunchSpec addr = f.Spec({"--rdzv_endpoint=[fd00::1]:29402", "--master_addr", "h", "x.py"});
  CHECK(addr.master_addr == "fd00::1");
  CHECK(HasNote(addr,
                "--master-addr h is ignored: --rdzv-endpoint [fd00::1]:29402 names the store (as "
                "torchrun does)"));
  CHECK(addr.layout.find("--rdzv-endpoint") != std::string::npos);
}

TEST_CASE("launch spec: --signals-to-handle adds the signals that stop the ranks",
          "[launch_spec]") {
  Fixture f;
  LaunchSpec s =
      f.Spec({"--signals-to-handle", "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1,SIGCHLD", "x.py"});
  CHECK(s.extra_stop_signals == std::vector<int>{SIGUSR1});
  const std::string notes = Notes(s);
  CHECK(notes.find(": SIGUSR1 also stop the ranks") != std::string::npos);
  CHECK(notes.find(": SIGCHLD keep gculaunch's own handling") != std::string::npos);
  CHECK(notes.find("still stops the ranks") == std::string::npos);
}

TEST_CASE("launch spec: torchrun flags with no effect here get one note each", "[launch_spec]") {
  Fixture f;
  LaunchSpec s = f.Spec({"--start-method", "fork", "--run-path", "--signals-to-handle",
                         "SIGTERM,SIGINT", "--event-log-handler", "console", "--logs-specs",
                         "default", "--local-addr", "10.0.0.2", "x.py"});
  const std::string notes = Notes(s);
  CHECK(notes.find("--start-method fork is accepted for torchrun compatibility and ignored: "
                   "every rank is a new process") != std::string::npos);
  CHECK(notes.find("--run-path is accepted for torchrun compatibility: torchrun would run SCRIPT "
                   "inside its own interpreter; gculaunch starts /usr/bin/python3 -u SCRIPT in "
                   "each rank") != std::string::npos);
  CHECK(notes.find("--signals-to-handle SIGTERM,SIGINT: gculaunch still stops the ranks on "
                   "SIGHUP, SIGQUIT (torchrun would die of it and leave its workers running)") !=
        std::string::npos);
  CHECK(s.extra_stop_signals.empty());
  CHECK(notes.find("--event-log-handler console is accepted for torchrun compatibility and "
                   "ignored") != std::string::npos);
  CHECK(notes.find("--local-addr 10.0.0.2 has no effect on a single node") != std::string::npos);
  CHECK(s.local_addr == "10.0.0.2");
  // Several nodes: the node publishes --local-addr.
  LaunchSpec multi = f.Spec({"--nnodes", "2", "--node-rank", "1", "--master-addr", "node0",
                             "--local_addr", "10.0.0.3", "x.py"});
  CHECK(multi.local_addr == "10.0.0.3");
  CHECK(Notes(multi).find("local-addr") == std::string::npos);
}

TEST_CASE("launch spec: --virtual-local-rank is --bind rank, --numa-binding is --cpu-affinity",
          "[launch_spec]") {
  Fixture f;
  LaunchSpec plain = f.Spec({"x.py"});
  CHECK(plain.bind == DeviceBind::kAll);
  LaunchSpec virt = f.Spec({"--virtual-local-rank", "x.py"});
  CHECK(virt.bind == DeviceBind::kRank);
  CHECK(virt.virtual_local_rank);
  // --device cpu (auto found no card): only LOCAL_RANK changes, and a note says so.
  CHECK(Notes(virt).find("--virtual-local-rank with device cpu: every rank gets LOCAL_RANK=0; "
                         "there is no card to hide") != std::string::npos);
  CHECK(f.Err({"--virtual-local-rank", "--bind", "all", "x.py"}) ==
        "gculaunch: --virtual-local-rank and --bind all conflict: a virtual local rank sees only "
        "its own card (fix: drop one of them)");
  CHECK(f.Spec({"--virtual-local-rank", "--bind", "rank", "x.py"}).bind == DeviceBind::kRank);
  // --cpu-affinity given: it decides, and the note says --numa-binding is ignored.
  LaunchSpec both = f.Spec({"--numa-binding", "node", "--cpu-affinity", "none", "x.py"});
  CHECK(both.cpu_affinity == CpuAffinity::kNone);
  CHECK(HasNote(both, "--numa-binding node is ignored: --cpu-affinity decides the CPU binding"));
}

TEST_CASE("launch spec: --virtual-local-rank on a card pool: LOCAL_RANK=0, one card each",
          "[launch_spec]") {
  Fixture f;
  f.env.Set("TOPS_VISIBLE_DEVICES", "4,6");  // torch maps the local rank through this list
  const LaunchSpec spec =
      f.Spec({"--device", "gcu", "--nproc-per-node", "2", "--virtual-local-rank", "x.py"});
  CHECK(Notes(spec).find("--virtual-local-rank: every rank gets LOCAL_RANK=0 and sees only its "
                         "own card, the pool's entry for its local rank, in TOPS_VISIBLE_DEVICES "
                         "and ENFLAME_VISIBLE_DEVICES") != std::string::npos);
  for (int local_rank = 0; local_rank < 2; ++local_rank) {
    const EnvMap env = BuildRankEnv(spec, f.env, local_rank, 0, DryRunRuntime(spec));
    CHECK(env.Get("LOCAL_RANK") == "0");
    CHECK(env.Get("RANK") == std::to_string(local_rank));
    CHECK(env.Get("TOPS_VISIBLE_DEVICES") == (local_rank == 0 ? "4" : "6"));
    CHECK(env.Get("GCULAUNCH_DEVICE_INDEX") == "0");
  }
  // More ranks than listed cards: torch raises; gculaunch refuses in one line.
  CHECK(f.Err({"--device", "gcu", "--nproc-per-node", "3", "--virtual-local-rank", "x.py"}) ==
        "gculaunch: --virtual-local-rank: 3 ranks need 3 cards but the pool has 2 "
        "(TOPS_VISIBLE_DEVICES=4,6) (fix: use --nproc-per-node 2 or fewer, or give the pool more "
        "cards)");
}

TEST_CASE("launch spec: PYTHONFAULTHANDLER and the progress interval", "[launch_spec]") {
  Fixture f;
  CHECK(f.Spec({"x.py"}).python_faulthandler);
  CHECK_FALSE(f.Spec({"--no-python-faulthandler", "x.py"}).python_faulthandler);
  CHECK(f.Spec({"x.py"}).progress_interval_s == 30.0);
  CHECK(f.Spec({"--progress-interval", "0", "x.py"}).progress_interval_s == 0.0);
  CHECK(f.Spec({"--progress-interval=2.5", "x.py"}).progress_interval_s == 2.5);
}

TEST_CASE("launch spec: store modes", "[launch_spec]") {
  Fixture f;
  LaunchSpec rank0 = f.Spec({"--no-agent-store", "x.py"});
  CHECK(rank0.store_mode == StoreMode::kRank0);
  CHECK(rank0.master_port == 29500);
  LaunchSpec worker = f.Spec({"--no-agent-store", "--worker-port", "29600", "x.py"});
  CHECK(worker.master_port == 29600);
  CHECK(worker.worker_port == 29600);
  LaunchSpec standalone = f.Spec({"--standalone", "--no-agent-store", "x.py"});
  CHECK(standalone.master_port == 0);
  CHECK(HasNote(standalone, "master port chosen at launch: a free port for rank 0's store"));
}

TEST_CASE("launch spec: multi-node ports and the rendezvous timeout", "[launch_spec]") {
  Fixture f;
  const std::vector<std::string> two = {"--nnodes",      "2",          "--node-rank",   "1",
                                        "--master-addr", "198.18.0.1", "--master-port", "29510"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = two;
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back("x.py");
    return args;
  };
  // Agent store: the ranks use the port the agents meet on.
  LaunchSpec agent = f.Spec(with({}));
  CHECK(agent.agent_port == 29510);
  CHECK(agent.master_port == 29510);
  CHECK(agent.rdzv_timeout_s == 900);
  CHECK(f.Spec({"--nproc-per-node", "2", "x.py"}).agent_port == 0);  // single node
  // --no-agent-store: rank 0's store gets --worker-port, or a port node 0 picks.
  LaunchSpec worker = f.Spec(with({"--no-agent-store", "--worker-port", "29600"}));
  CHECK(worker.agent_port == 29510);
  CHECK(worker.master_port == 29600);
  LaunchSpec picked = f.Spec(with({"--no-agent-store"}));
  CHECK(picked.agent_port == 29510);
  CHECK(picked.master_port == 0);
  CHECK(HasNote(picked,
                "rank 0's store port is chosen at launch by node 0 (--no-agent-store "
                "without --worker-port); MASTER_PORT 29510 stays node 0's gculaunch's"));
  CHECK(f.Err(with({"--no-agent-store", "--worker-port", "29510"})) ==
        "gculaunch: --worker-port 29510 is MASTER_PORT, where node 0's gculaunch meets the other "
        "nodes (fix: give rank 0's store another port, or drop --worker-port to let node 0 pick "
        "a free one)");
  // --rdzv-timeout, else --rdzv-conf join_timeout / timeout.
  CHECK(f.Spec(with({"--rdzv-timeout", "12.5"})).rdzv_timeout_s == 12.5);
  CHECK(f.Spec(with({"--rdzv-conf", "timeout=30"})).rdzv_timeout_s == 30);
  CHECK(f.Spec(with({"--rdzv-conf", "timeout=30,join_timeout=40"})).rdzv_timeout_s == 40);
  CHECK(f.Spec(with({"--rdzv-conf", "join_timeout=40", "--rdzv-timeout", "5"})).rdzv_timeout_s ==
        5);
  f.env.Set("PET_RDZV_TIMEOUT", "7");
  CHECK(f.Spec(with({})).rdzv_timeout_s == 7);
  // --node-timeout: 30 s unless given.
  CHECK(agent.node_timeout_s == 30);
  CHECK(f.Spec(with({"--node-timeout", "12"})).node_timeout_s == 12);
}

TEST_CASE("launch spec: conflicting topology flags", "[launch_spec]") {
  Fixture f;
  CHECK(f.Err({"--nnodes", "2", "--node-rank", "2", "--master-addr", "n", "x.py"}) ==
        "gculaunch: --node-rank 2: must be below the number of nodes (2) (fix: node ranks run "
        "from 0 to 1; check --node-rank and --nnodes)");
  CHECK(f.Err({"--standalone", "--nnodes", "2", "x.py"}) ==
        "gculaunch: --standalone runs a single node but --nnodes is 2 (fix: drop --standalone, "
        "or use --nnodes 1)");
  CHECK(f.Err({"--nnodes", "2", "x.py"}) ==
        "gculaunch: --nnodes 2 needs the store's address: the default 127.0.0.1 is not reachable "
        "from other nodes (fix: give --master-addr HOST (node 0's address) on every node)");
  CHECK(f.Err({"--nnodes", "2", "--master-addr", "n", "--master-port", "0", "x.py"}) ==
        "gculaunch: port 0 (chosen at launch) cannot work across 2 nodes (fix: give a fixed port "
        "on every node, e.g. --master-port 29500)");
  CHECK(f.Err({"--run-id", "a", "--rdzv-id", "b", "x.py"}) ==
        "gculaunch: --run-id 'a' and --rdzv-id 'b' disagree (fix: give only one of them)");
  CHECK(f.Err({"--worker-port", "29600", "x.py"}) ==
        "gculaunch: --worker-port only applies with --no-agent-store (fix: add --no-agent-store, "
        "or drop --worker-port)");
  CHECK(f.Err({"--format", "json", "x.py"}) ==
        "gculaunch: --format only applies to --dry-run (fix: add --dry-run, or drop --format)");
  CHECK(f.Err({"--nnodes", "100000", "--master-addr", "n", "--nproc-per-node", "65536", "x.py"}) ==
        "gculaunch: 100000 nodes x 65536 ranks is more than 16777216 ranks (fix: check --nnodes "
        "and --nproc-per-node)");
  f.env.Set("PET_NNODES", "3");
  CHECK(f.Err({"--standalone", "x.py"}) ==
        "gculaunch: --standalone runs a single node but PET_NNODES is 3 (fix: drop "
        "--standalone, or use --nnodes 1)");
}

TEST_CASE("launch spec: --max-same-failures and --progress-file", "[launch_spec]") {
  Fixture f;
  LaunchSpec s = f.Spec({"x.py"});
  CHECK(s.max_same_failures == 3);
  CHECK(s.progress_file.empty());
  s = f.Spec({"--max-same-failures", "0", "x.py"});
  CHECK(s.max_same_failures == 0);
  s = f.Spec({"--progress-file", "ckpt/step", "--max-same-failures", "2", "x.py"});
  CHECK(s.max_same_failures == 2);
  CHECK(s.progress_file == "ckpt/step");
  CHECK(HasNote(s,
                "--progress-file ckpt/step: read after each failed attempt; 2 failed attempts in "
                "a row without a higher number there stop the restarts (--max-same-failures)"));
  CHECK(f.Err({"--progress-file", "p", "--max-same-failures", "0", "x.py"}) ==
        "gculaunch: --progress-file needs --max-same-failures N, but --max-same-failures is 0 "
        "(off) (fix: drop --max-same-failures 0 (the default is 3), or drop --progress-file)");
  f.env.Set("PET_MAX_SAME_FAILURES", "0");
  CHECK(f.Err({"--progress-file", "p", "x.py"}) ==
        "gculaunch: --progress-file needs --max-same-failures N, but PET_MAX_SAME_FAILURES is 0 "
        "(off) (fix: drop --max-same-failures 0 (the default is 3), or drop --progress-file)");
}

TEST_CASE("launch spec: --device auto picks the first profile with device files", "[launch_spec]") {
  Fixture f;
  f.probe.AddCards("nvidia-cuda", "nvidia", {0, 1});
  LaunchSpec cuda = f.Spec({"x.py"});
  CHECK(cuda.profile.name == "nvidia-cuda");
  CHECK(HasNote(cuda, "device nvidia-cuda: --device auto found 2 device files /dev/nvidiaN"));

  f.probe.AddCards("enflame-gcu", "gcu", {0, 1, 2, 3, 4, 5, 6, 7});
  LaunchSpec gcu = f.Spec({"--nproc-per-node", "auto", "x.py"});
  CHECK(gcu.profile.name == "enflame-gcu");
  CHECK(gcu.nproc_per_node == 8);
  CHECK(gcu.device_pool == std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6", "7"});
  CHECK(gcu.pool_source == "8 device files /dev/gcuN");
  CHECK(Notes(gcu) ==
        "device enflame-gcu: --device auto found 8 device files /dev/gcuN\n"
        "card pool 0-7: indices of the 8 device files /dev/gcu0 /dev/gcu1 /dev/gcu2 /dev/gcu3 "
        "/dev/gcu4 /dev/gcu5 /dev/gcu6 /dev/gcu7\n"
        "nproc-per-node 8: one rank per card\n"
        "interpreter /usr/bin/python3 (python3 on PATH)\n"
        "OMP_NUM_THREADS=1 for every rank (torchrun's default with more than one rank per node; "
        "set OMP_NUM_THREADS to choose another value)\n");
}

TEST_CASE("launch spec: --device auto on a fake /dev tree (--sysroot)", "[launch_spec]") {
  testing::TempDir root;
  for (int i = 0; i < 4; ++i) root.Write("dev/gcu" + std::to_string(i));
  root.Write("dev/gcuctl");
  root.Write("dev/nvidia0");
  Fixture f;
  auto cli = ParseCli({"--sysroot", root.path(), "--nproc-per-node", "auto", "x.py"}, f.env);
  REQUIRE(cli.ok());
  FileSystemDeviceProbe probe(*cli->options.sysroot);
  auto spec = MakeLaunchSpec(cli->options, f.env, probe, f.files);
  REQUIRE(spec.ok());
  CHECK(spec->profile.name == "enflame-gcu");
  CHECK(spec->nproc_per_node == 4);
  CHECK(spec->device_pool == std::vector<std::string>{"0", "1", "2", "3"});
}

TEST_CASE("launch spec: device files keep host minors, the pool holds runtime indices",
          "[launch_spec]") {
  Fixture f;
  f.probe.AddCards("enflame-gcu", "gcu", {4, 5, 6, 7});
  LaunchSpec s = f.Spec({"--device", "gcu", "--nproc-per-node", "gpu", "x.py"});
  CHECK(s.device_pool == std::vector<std::string>{"0", "1", "2", "3"});
  CHECK(s.nproc_per_node == 4);
}

TEST_CASE("launch spec: a visible-devices list in the environment is the pool", "[launch_spec]") {
  Fixture f;
  f.probe.AddCards("enflame-gcu", "gcu", {0, 1, 2, 3, 4, 5, 6, 7});
  f.env.Set("TOPS_VISIBLE_DEVICES", "4, 5,6,7");
  LaunchSpec s = f.Spec({"--nproc-per-node", "auto", "--bind", "rank", "x.py"});
  CHECK(s.device_pool == std::vector<std::string>{"4", "5", "6", "7"});
  CHECK(s.pool_source == "TOPS_VISIBLE_DEVICES=4, 5,6,7");
  CHECK(s.nproc_per_node == 4);
  CHECK(s.bind == DeviceBind::kRank);
  CHECK(HasNote(s, "card pool 4,5,6,7 from TOPS_VISIBLE_DEVICES in the environment"));

  // Only the process-level variable (the first one) chooses the pool.
  Fixture g;
  g.probe.AddCards("enflame-gcu", "gcu", {0, 1});
  g.env.Set("ENFLAME_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7");
  LaunchSpec container = g.Spec({"--device", "gcu", "--nproc-per-node", "auto", "x.py"});
  CHECK(container.device_pool == std::vector<std::string>{"0", "1"});
  CHECK(HasNote(container,
                "ENFLAME_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 is the container runtime's variable: it "
                "does not choose cards inside a running container; gculaunch sets it to the "
                "card pool"));
  g.env.Set("NVIDIA_VISIBLE_DEVICES", "all");
  g.probe.AddCards("nvidia-cuda", "nvidia", {0});
  CHECK(HasNote(g.Spec({"--device", "cuda", "x.py"}),
                "NVIDIA_VISIBLE_DEVICES=all is the container runtime's variable: it does not "
                "choose cards inside a running container; the card pool comes from "
                "CUDA_VISIBLE_DEVICES or the device files"));
}

TEST_CASE("launch spec: bad visible-devices lists", "[launch_spec]") {
  Fixture f;
  f.env.Set("TOPS_VISIBLE_DEVICES", "");
  CHECK(f.Err({"--device", "gcu", "x.py"}) ==
        "gculaunch: TOPS_VISIBLE_DEVICES is set but empty: no cards are visible (fix: unset "
        "TOPS_VISIBLE_DEVICES to use every card, or list cards such as TOPS_VISIBLE_DEVICES=0,1)");
  f.env.Set("TOPS_VISIBLE_DEVICES", "1,1");
  CHECK(f.Err({"--device", "gcu", "x.py"}) ==
        "gculaunch: TOPS_VISIBLE_DEVICES='1,1': card 1 is listed twice (fix: list each card "
        "once, e.g. TOPS_VISIBLE_DEVICES=0,1,2,3)");
  f.env.Set("TOPS_VISIBLE_DEVICES", "1,,2");
  CHECK(f.Err({"--device", "gcu", "x.py"}) ==
        "gculaunch: TOPS_VISIBLE_DEVICES='1,,2': empty entry (fix: list each card once, e.g. "
        "TOPS_VISIBLE_DEVICES=0,1,2,3)");
  f.env.Set("TOPS_VISIBLE_DEVICES", "1,2,");
  CHECK(f.Err({"--device", "gcu", "x.py"}) ==
        "gculaunch: TOPS_VISIBLE_DEVICES='1,2,': empty entry (fix: list each card once, e.g. "
        "TOPS_VISIBLE_DEVICES=0,1,2,3)");
  f.env.Set("TOPS_VISIBLE_DEVICES", "0\n1");
  CHECK(f.Err({"--device", "gcu", "x.py"}) ==
        "gculaunch: TOPS_VISIBLE_DEVICES='0\\n1': '0\\n1' is not a card id (fix: list each card "
        "once, e.g. TOPS_VISIBLE_DEVICES=0,1,2,3)");
  // Another profile's variable is not read.
  CHECK(f.Spec({"--device", "cpu", "x.py"}).device_pool.empty());
}

TEST_CASE("launch spec: --nproc-per-node auto, gpu and cpu", "[launch_spec]") {
  Fixture f;
  f.probe.cpus = 6;
  CHECK(f.Spec({"--nproc-per-node", "auto", "x.py"}).nproc_per_node == 6);  // cpu profile
  CHECK(f.Spec({"--nproc-per-node", "cpu", "x.py"}).nproc_per_node == 6);
  CHECK(f.Err({"--nproc-per-node", "gpu", "x.py"}) ==
        "gculaunch: --nproc-per-node gpu: the device profile cpu has no cards (fix: give a "
        "number, or choose a device with --device)");
  CHECK(f.Err({"--device", "gcu", "--nproc-per-node", "auto", "--dry-run", "x.py"}) ==
        "gculaunch: --nproc-per-node auto: no enflame-gcu cards found (no /dev/gcuN; driver "
        "/sys/module/enflame not loaded) (fix: give a number such as --nproc-per-node 8 "
        "(--dry-run then previews without cards), check the driver and the container's device "
        "mounts, or use --device cpu)");
  f.probe.AddCards("enflame-gcu", "gcu", {0, 1, 2});
  CHECK(f.Spec({"--nproc-per-node", "gpu", "x.py"}).nproc_per_node == 3);
  CHECK(f.Spec({"--nproc-per-node", "cpu", "x.py"}).nproc_per_node == 6);
}

TEST_CASE("launch spec: no cards: a real launch stops, a dry run previews", "[launch_spec]") {
  Fixture f;
  CHECK(f.Err({"--device", "gcu", "--nproc-per-node", "8", "x.py"}) ==
        "gculaunch: --device gcu: no enflame-gcu cards found (no /dev/gcuN; driver "
        "/sys/module/enflame not loaded) (fix: check the driver and the container's device "
        "mounts, or use --device cpu (--dry-run previews without cards))");
  f.probe.existing.insert("/sys/module/enflame");
  LaunchSpec s = f.Spec({"--dry-run", "--device", "gcu", "--nproc-per-node", "8", "x.py"});
  CHECK(s.dry_run);
  CHECK(s.nproc_per_node == 8);
  CHECK(s.device_pool == std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6", "7"});
  CHECK(s.pool_source == "assumed for the dry run");
  CHECK(HasNote(s,
                "no enflame-gcu cards found (no /dev/gcuN; driver /sys/module/enflame is "
                "loaded): previewing as if cards 0-7 were present"));
}

TEST_CASE("launch spec: --bind rank needs a card per rank", "[launch_spec]") {
  Fixture f;
  f.env.Set("TOPS_VISIBLE_DEVICES", "4,5,6,7");
  CHECK(f.Err({"--device", "gcu", "--nproc-per-node", "8", "--bind", "rank", "x.py"}) ==
        "gculaunch: --bind rank: 8 ranks need 8 cards but the pool has 4 "
        "(TOPS_VISIBLE_DEVICES=4,5,6,7) (fix: use --nproc-per-node 4 or fewer, or --bind all)");
  LaunchSpec dry =
      f.Spec({"--dry-run", "--device", "gcu", "--nproc-per-node", "8", "--bind", "rank", "x.py"});
  CHECK(HasNote(dry,
                "--bind rank: 8 ranks need 8 cards but the pool has 4 "
                "(TOPS_VISIBLE_DEVICES=4,5,6,7); a real launch stops here"));
  LaunchSpec shared = f.Spec({"--device", "gcu", "--nproc-per-node", "8", "x.py"});
  CHECK(HasNote(shared, "8 ranks on 4 cards: ranks share cards round-robin (GCULAUNCH_DEVICE)"));
  LaunchSpec cpu = f.Spec({"--device", "cpu", "--bind", "rank", "x.py"});
  CHECK(cpu.bind == DeviceBind::kRank);
  CHECK(HasNote(cpu, "--bind rank has no effect: device cpu has no cards"));
}

TEST_CASE("launch spec: device profile from a YAML file", "[launch_spec]") {
  Fixture f;
  f.files.files["site/accel.yaml"] =
      "name: site-accel\nbackend: xccl\nvisible_env: [XPU_VISIBLE_DEVICES]\n"
      "devices: {pattern: 'xpu([0-9]+)'}\n";
  f.probe.AddCards("site-accel", "xpu", {0, 1});
  LaunchSpec s = f.Spec({"--device", "site/accel.yaml", "--nproc-per-node", "auto", "x.py"});
  CHECK(s.profile.name == "site-accel");
  CHECK(s.profile.source == "site/accel.yaml");
  CHECK(s.nproc_per_node == 2);
  CHECK(HasNote(s, "device site-accel from site/accel.yaml"));

  f.files.files["bad.yaml"] = "name: x\nbackend: gloo\ncolour: red\n";
  CHECK(f.Err({"--device", "bad.yaml", "x.py"})
            .rfind("gculaunch: bad.yaml:3: unknown key 'colour' (fix: known keys: ", 0) == 0);
  CHECK(f.Err({"--device", "missing.yaml", "x.py"}) ==
        "gculaunch: --device: cannot read 'missing.yaml': No such file or directory (fix: give "
        "an existing profile file, or one of gcu, cuda, ascend, mlu, rocm, cpu)");
  CHECK(f.Err({"--device", "tpu", "x.py"}) ==
        "gculaunch: --device 'tpu': no device profile named 'tpu' (fix: use one of gcu, cuda, "
        "ascend, mlu, rocm, cpu, auto, or a YAML file path)");
  f.env.Set("PET_DEVICE", "tpu");
  CHECK(f.Err({"x.py"}) ==
        "gculaunch: PET_DEVICE 'tpu': no device profile named 'tpu' (fix: use one of gcu, cuda, "
        "ascend, mlu, rocm, cpu, auto, or a YAML file path)");
}

TEST_CASE("launch spec: interpreter and command line", "[launch_spec]") {
  Fixture f;
  f.files.executables["/opt/py/bin/python3"] = "/opt/py/bin/python3";
  f.files.executables["python3.8"] = "/usr/local/bin/python3.8";
  CHECK(f.Spec({"--python", "/opt/py/bin/python3", "t.py", "a"}).argv ==
        std::vector<std::string>{"/opt/py/bin/python3", "-u", "t.py", "a"});
  CHECK(f.Spec({"--python", "python3.8", "t.py"}).executable == "/usr/local/bin/python3.8");
  CHECK(f.Err({"--python", "/nope/python", "t.py"}) ==
        "gculaunch: --python '/nope/python': not found (fix: give the path of a Python "
        "interpreter)");
  CHECK(f.Make({"--python", "/nope/python", "t.py"}).error().exit_code == 127);
  f.files.other_files.insert("/opt/py/bin/python.txt");
  CHECK(f.Err({"--python", "/opt/py/bin/python.txt", "t.py"}) ==
        "gculaunch: --python '/opt/py/bin/python.txt': not an executable file (fix: give the "
        "path of a Python interpreter)");
  CHECK(f.Make({"--python", "/opt/py/bin/python.txt", "t.py"}).error().exit_code == 126);
  CHECK(f.Err({"--python", "python9", "t.py"}) ==
        "gculaunch: --python 'python9': not found on PATH (fix: give the path of a Python "
        "interpreter)");
  CHECK(f.Spec({"-m", "pkg.train", "--lr", "1"}).argv ==
        std::vector<std::string>{"/usr/bin/python3", "-u", "-m", "pkg.train", "--lr", "1"});
  CHECK(f.Spec({"--local-rank-arg", "t.py", "a"}).argv ==
        std::vector<std::string>{"/usr/bin/python3", "-u", "t.py", "--local_rank=${local_rank}",
                                 "a"});
  CHECK(f.Spec({"--use-env", "t.py"}).argv ==
        std::vector<std::string>{"/usr/bin/python3", "-u", "t.py"});

  f.env.Set("PYTHON_EXEC", "python3.8");
  LaunchSpec exec = f.Spec({"t.py"});
  CHECK(exec.python == "/usr/local/bin/python3.8");
  CHECK(HasNote(exec, "interpreter /usr/local/bin/python3.8 (PYTHON_EXEC)"));
  CHECK(exec.python_origin == "PYTHON_EXEC");
  CHECK(f.Spec({"--python", "python3.8", "t.py"}).python_origin == "--python");
  CHECK(f.Spec({"--python", "/opt/py/bin/python3", "t.py"}).python == "/opt/py/bin/python3");
  f.env.Set("PYTHON_EXEC", "/gone/python");
  CHECK(f.Err({"t.py"}) ==
        "gculaunch: PYTHON_EXEC '/gone/python': not found (fix: fix or unset PYTHON_EXEC)");
  f.env.Erase("PYTHON_EXEC");

  f.files.executables.erase("python3");
  CHECK(f.Err({"t.py"}) ==
        "gculaunch: python3 was not found on PATH (fix: install Python 3, or give --python "
        "PATH)");
  CHECK(f.Make({"t.py"}).error().exit_code == 127);
  LaunchSpec dry = f.Spec({"--dry-run", "t.py"});
  CHECK(dry.argv == std::vector<std::string>{"python3", "-u", "t.py"});
  CHECK(HasNote(dry, "python3 was not found on PATH; a real launch stops here"));

  // The ranks' PATH (after --env) is where programs are looked up.
  f.files.executables["python3"] = "/venv/bin/python3";
  f.Spec({"--env", "PATH=/venv/bin", "t.py"});
  CHECK(f.files.last_path_var == "/venv/bin");
}

TEST_CASE("launch spec: --no-python runs the program itself", "[launch_spec]") {
  Fixture f;
  f.files.executables["./run.sh"] = "./run.sh";
  f.files.executables["hostname"] = "/usr/bin/hostname";
  LaunchSpec s = f.Spec({"--no-python", "--local-rank-arg", "./run.sh", "x"});
  CHECK(s.argv == std::vector<std::string>{"./run.sh", "--local_rank=${local_rank}", "x"});
  CHECK(s.executable == "./run.sh");
  CHECK(s.python.empty());
  CHECK(s.python_origin.empty());
  CHECK(f.Spec({"t.py"}).python_origin == "python3 on PATH");
  LaunchSpec bare = f.Spec({"--no-python", "hostname"});
  CHECK(bare.argv == std::vector<std::string>{"hostname"});
  CHECK(bare.executable == "/usr/bin/hostname");
  // As the shell says: 127 not found, 126 found but not executable (not the usage code 2).
  CHECK(f.Err({"--no-python", "./missing.sh"}) ==
        "gculaunch: SCRIPT './missing.sh' was not found (fix: check the path (a relative path "
        "starts in the current directory))");
  CHECK(f.Make({"--no-python", "./missing.sh"}).error().exit_code == 127);
  f.files.other_files.insert("./plain.sh");
  CHECK(f.Err({"--no-python", "./plain.sh"}) ==
        "gculaunch: SCRIPT './plain.sh' is not an executable file (fix: make it executable "
        "(chmod +x), or drop --no-python to run it with Python)");
  CHECK(f.Make({"--no-python", "./plain.sh"}).error().exit_code == 126);
  CHECK(f.Err({"--no-python", "trainer"}) ==
        "gculaunch: SCRIPT 'trainer' was not found on PATH (fix: give its path, e.g. "
        "./trainer)");
  CHECK(f.Make({"--no-python", "trainer"}).error().exit_code == 127);
  CHECK(f.Err({"-m", "--no-python", "x"}) ==
        "gculaunch: --module and --no-python conflict (fix: drop one: -m runs SCRIPT as a Python "
        "module, --no-python runs SCRIPT as a program)");
}

TEST_CASE("launch spec: --env may not set gculaunch's per-rank variables", "[launch_spec]") {
  Fixture f;
  CHECK(f.Err({"--env", "RANK=3", "x.py"}) ==
        "gculaunch: --env RANK=3: RANK is set by gculaunch for each rank (fix: use --nnodes, "
        "--node-rank and --nproc-per-node)");
  CHECK(f.Err({"--env", "MASTER_PORT=1", "x.py"}) ==
        "gculaunch: --env MASTER_PORT=1: MASTER_PORT is set by gculaunch for each rank (fix: use "
        "--master-addr and --master-port)");
  CHECK(f.Err({"--env", "TORCHELASTIC_RUN_ID=x", "x.py"}) ==
        "gculaunch: --env TORCHELASTIC_RUN_ID=x: TORCHELASTIC_RUN_ID is set by gculaunch for each "
        "rank (fix: use --run-id)");
  CHECK(f.Err({"--env", "GCULAUNCH_DEVICE=1", "x.py"}) ==
        "gculaunch: --env GCULAUNCH_DEVICE=1: GCULAUNCH_DEVICE is set by gculaunch for each rank "
        "(fix: gculaunch derives it from the card pool, --bind and --device)");
  CHECK(f.Err({"--dry-run", "--device", "gcu", "--env", "ENFLAME_VISIBLE_DEVICES=1", "x.py"}) ==
        "gculaunch: --env ENFLAME_VISIBLE_DEVICES=1: ENFLAME_VISIBLE_DEVICES is set by gculaunch "
        "for each rank (fix: choose the card pool in gculaunch's own environment "
        "(TOPS_VISIBLE_DEVICES=0,1 gculaunch ...), and use --bind rank for one card per rank)");
  f.env.Set("PET_ENV", "WORLD_SIZE=2");
  CHECK(f.Err({"x.py"}) ==
        "gculaunch: PET_ENV WORLD_SIZE=2: WORLD_SIZE is set by gculaunch for each rank (fix: use "
        "--nnodes, --node-rank and --nproc-per-node)");
  f.env.Erase("PET_ENV");
  // Another profile's visible-devices variable is an ordinary variable.
  LaunchSpec s =
      f.Spec({"--device", "cpu", "--env", "CUDA_VISIBLE_DEVICES=", "--env", "A=1", "x.py"});
  CHECK(s.extra_env ==
        std::vector<std::pair<std::string, std::string>>{{"CUDA_VISIBLE_DEVICES", ""}, {"A", "1"}});
}

TEST_CASE("launch spec: OMP_NUM_THREADS default", "[launch_spec]") {
  Fixture f;
  LaunchSpec two = f.Spec({"--nproc-per-node", "2", "x.py"});
  CHECK(two.omp_num_threads_default == "1");
  CHECK(HasNote(two,
                "OMP_NUM_THREADS=1 for every rank (torchrun's default with more than one "
                "rank per node; set OMP_NUM_THREADS to choose another value)"));
  CHECK(f.Spec({"--nproc-per-node", "1", "x.py"}).omp_num_threads_default.empty());
  CHECK(f.Spec({"--nproc-per-node", "2", "--env", "OMP_NUM_THREADS=5", "x.py"})
            .omp_num_threads_default.empty());
  f.env.Set("OMP_NUM_THREADS", "8");
  CHECK(f.Spec({"--nproc-per-node", "2", "x.py"}).omp_num_threads_default.empty());
}

TEST_CASE("launch spec: supervision and output settings", "[launch_spec]") {
  Fixture f;
  f.env.Set("TORCHELASTIC_ERROR_FILE", "/outer/error.json");
  LaunchSpec s = f.Spec({"--nproc-per-node",
                         "4",
                         "--grace-period",
                         "10",
                         "--log-dir",
                         "logs/",
                         "--tee",
                         "3",
                         "--redirects",
                         "0:2",
                         "--local-ranks-filter",
                         "0,3",
                         "--stdin",
                         "rank0",
                         "--summary-json",
                         "out.json",
                         "--monitor-interval",
                         "5",
                         "--rdzv-conf",
                         "join_timeout=60",
                         "x.py"});
  CHECK(s.grace_period_s == 10.0);
  CHECK(s.log_dir == "logs");
  CHECK(RunLogRoot(s, "job") == "logs/job_<random>");
  CHECK(WantsLogFiles(s));
  CHECK(s.tee.For(2) == 3);
  CHECK(s.redirects.For(0) == 2);
  CHECK(s.redirects.For(1) == 0);
  CHECK(s.console_local_ranks == std::vector<int>{0, 3});
  CHECK(s.stdin_mode == StdinMode::kRank0);
  CHECK(s.summary_json == "out.json");
  CHECK(s.error_file_parent == "/outer/error.json");
  CHECK(s.rdzv_conf == std::map<std::string, std::string>{{"join_timeout", "60"}});
  CHECK(HasNote(s,
                "--monitor-interval is accepted for torchrun compatibility and ignored: "
                "gculaunch notices a rank's exit at once"));
  CHECK(RunLogRoot(f.Spec({"x.py"}), "job").empty());
  CHECK(f.Spec({"--shutdown-timeout", "3", "x.py"}).grace_period_s == 3.0);

  // torchrun: --redirects/--tee without --log-dir write to a new kept temporary directory.
  const LaunchSpec teed = f.Spec({"--tee", "3", "x.py"});
  CHECK(teed.tee.For(0) == 3);
  CHECK(WantsLogFiles(teed));
  CHECK(WantsLogFiles(f.Spec({"--redirects", "1", "x.py"})));
  CHECK_FALSE(WantsLogFiles(f.Spec({"x.py"})));
  // A map written for 8 cards on a node with 2: the absent ranks' entries are ignored with a
  // warning (shown at launch too), as torchrun ignores them; the present ranks' entries still
  // count.
  const LaunchSpec eight = f.Spec({"--nproc-per-node", "2", "--log-dir", "l", "--redirects",
                                   "1:3,2:3,7:1", "--tee", "5:2", "x.py"});
  CHECK(eight.redirects.per_rank == std::map<int, int>{{1, 3}});
  CHECK(eight.redirects.For(0) == 0);
  CHECK(eight.redirects.For(1) == 3);
  CHECK(eight.tee.per_rank.empty());
  CHECK(eight.tee.For(0) == 0);
  CHECK(HasWarning(eight,
                   "--redirects: ignored the entries for local ranks 2,7, which this node does not "
                   "run (nproc-per-node is 2), as torchrun does"));
  CHECK(HasWarning(eight,
                   "--tee: ignored the entries for local rank 5, which this node does not run "
                   "(nproc-per-node is 2), as torchrun does"));
  CHECK(f.Spec({"--nproc-per-node", "2", "--redirects", "0:1,1:2", "x.py"}).warnings.empty());
  CHECK(f.Err({"--nproc-per-node", "2", "--local-ranks-filter", "0,2", "x.py"}) ==
        "gculaunch: --local-ranks-filter 2: there are only 2 local ranks (fix: use local ranks 0 "
        "to 1)");
}

TEST_CASE("launch spec: platform information ranks below flags and PET_ variables",
          "[launch_spec]") {
  Fixture f;
  f.platform.nnodes = 2;
  f.platform.node_rank = 1;
  f.platform.master_addr = "master-0";
  f.platform.master_port = 23456;
  f.platform.nnodes_from = "WORLD_SIZE=2 (nodes)";
  f.platform.node_rank_from = "RANK=1";
  f.platform.master_addr_from = "MASTER_ADDR";
  f.platform.master_port_from = "MASTER_PORT";
  LaunchSpec s = f.Spec({"--nproc-per-node", "8", "x.py"});
  CHECK(s.nnodes == 2);
  CHECK(s.node_rank == 1);
  CHECK(s.rank_offset == 8);
  CHECK(s.world_size == 16);
  CHECK(s.master_addr == "master-0");
  CHECK(s.master_port == 23456);
  CHECK(s.layout ==
        "layout: 2 nodes x 8 ranks, node 1, master master-0:23456 (from WORLD_SIZE=2 (nodes), "
        "RANK=1, MASTER_ADDR, MASTER_PORT)");
  f.env.Set("PET_NODE_RANK", "0");
  LaunchSpec overridden = f.Spec({"--master-addr", "m1", "--master-port", "29500", "x.py"});
  CHECK(overridden.node_rank == 0);
  CHECK(overridden.master_addr == "m1");
  CHECK(overridden.master_port == 29500);
  CHECK(overridden.layout ==
        "layout: 2 nodes x 1 rank, node 0, master m1:29500 (from WORLD_SIZE=2 (nodes), "
        "PET_NODE_RANK=0, --master-addr, --master-port)");
}

TEST_CASE("launch spec: LocalFileAccess searches PATH like execvp", "[launch_spec]") {
  testing::TempDir dir;
  const std::string tool = dir.Write("bin/tool", "#!/bin/sh\n");
  dir.Write("bin/plain", "data");
  std::filesystem::permissions(tool, std::filesystem::perms::owner_all);
  LocalFileAccess files;
  CHECK(files.FindExecutable("tool", "/nonexistent:" + dir.path() + "/bin") == tool);
  CHECK_FALSE(files.FindExecutable("plain", dir.path() + "/bin").has_value());
  CHECK_FALSE(files.FindExecutable("tool", "/nonexistent").has_value());
  CHECK(files.FindExecutable(tool, "") == tool);
  CHECK_FALSE(files.FindExecutable(dir.path() + "/bin", "").has_value());  // a directory
  CHECK(files.ReadTextFile(dir.path() + "/bin/plain").value() == "data");
  auto missing = files.ReadTextFile(dir.path() + "/none.yaml");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().what ==
        "cannot read '" + dir.path() + "/none.yaml': No such file or directory");
}

}  // namespace
TEST_CASE("launch spec: --metrics-port and --metrics-addr", "[launch_spec]") {
  Fixture f;
  auto off = f.Make({"x.py"});
  REQUIRE(off.ok());
  CHECK_FALSE(off->metrics_port.has_value());
  CHECK(off->metrics_addr == "127.0.0.1");
  auto on = f.Make({"--metrics-port", "9464", "--metrics-addr", "::", "x.py"});
  REQUIRE(on.ok());
  CHECK(on->metrics_port == 9464);
  CHECK(on->metrics_addr == "::");
  CHECK(f.Err({"--metrics-addr", "0.0.0.0", "x.py"}) ==
        "gculaunch: --metrics-addr only applies with --metrics-port (fix: add --metrics-port "
        "PORT, or drop --metrics-addr)");
  CHECK(f.Err({"--metrics-port", "1", "--metrics-addr", "a b", "x.py"}) ==
        "gculaunch: --metrics-addr 'a b' is not an address (fix: give a numeric address such as "
        "127.0.0.1, 0.0.0.0 or ::)");
}

TEST_CASE("launch spec: --job-secret-file and GCULAUNCH_JOB_SECRET_FILE", "[launch_spec]") {
  Fixture f;
  f.files.files["/run/secrets/job"] = "Zm9vYmFy\n";
  f.files.files["/run/secrets/empty"] = "\r\n";
  const LaunchSpec none = f.Spec({"x.py"});
  CHECK(none.job_secret.empty());
  const LaunchSpec s = f.Spec({"--job-secret-file", "/run/secrets/job", "x.py"});
  CHECK(s.job_secret == "Zm9vYmFy");  // the trailing line break is not part of it
  CHECK(s.job_secret_file == "/run/secrets/job");
  CHECK(f.Err({"--job-secret-file", "/run/secrets/empty", "x.py"}) ==
        "gculaunch: --job-secret-file /run/secrets/empty is empty (fix: put the job's secret in "
        "it, the same on every node, e.g. head -c 32 /dev/urandom | base64 > FILE)");
  CHECK(f.Err({"--job-secret-file", "/nope", "x.py"}) ==
        "gculaunch: --job-secret-file /nope: cannot read '/nope': No such file or directory "
        "(fix: name a readable file holding the job's secret)");
  // The variable names the file when the flag does not; the ranks inherit neither.
  f.env.Set("GCULAUNCH_JOB_SECRET_FILE", "/run/secrets/job");
  const LaunchSpec from_env = f.Spec({"x.py"});
  CHECK(from_env.job_secret == "Zm9vYmFy");
  const EnvMap rank = BuildRankEnv(from_env, f.env, 0, 0, RankRuntime{});
  CHECK_FALSE(rank.Has("GCULAUNCH_JOB_SECRET_FILE"));
  for (const auto& [key, value] : rank.vars()) CHECK(value.find("Zm9vYmFy") == std::string::npos);
  // The dry run says only that there is one.
  for (DryRunFormat format : {DryRunFormat::kTable, DryRunFormat::kJson, DryRunFormat::kEnv}) {
    LaunchSpec shown = from_env;
    shown.dry_run_format = format;
    const std::string out = RenderDryRun(shown, f.env);
    CHECK(out.find("Zm9vYmFy") == std::string::npos);
    CHECK(out.find("set (file /run/secrets/job)") != std::string::npos);
  }
  f.env.Set("GCULAUNCH_JOB_SECRET_FILE", "/nope");
  CHECK(f.Err({"x.py"}).starts_with("gculaunch: GCULAUNCH_JOB_SECRET_FILE /nope: cannot read"));
}

TEST_CASE("launch spec: --store-allow", "[launch_spec]") {
  Fixture f;
  const LaunchSpec s = f.Spec({"--store-allow", "198.18.0.0/30, fd00::/64", "x.py"});
  REQUIRE(s.store_allow.size() == 2);
  CHECK(s.store_allow[0].ToString() == "198.18.0.0/30");
  CHECK(s.store_allow[1].ToString() == "fd00::/64");
  CHECK(f.Err({"--store-allow", "10.0.0.0/33", "x.py"}) ==
        "gculaunch: --store-allow '10.0.0.0/33' is not a network: the prefix length must be 0 "
        "to 32 (fix: write networks as 10.0.0.0/8, 198.18.0.5 or fd00::/64)");
  CHECK(f.Err({"--store-allow", "node1", "x.py"}) ==
        "gculaunch: --store-allow 'node1' is not a network: 'node1' is not a numeric IPv4 or "
        "IPv6 address (fix: write networks as 10.0.0.0/8, 198.18.0.5 or fd00::/64)");
  LaunchSpec shown = s;
  CHECK(RenderDryRun(shown, f.env).find("allow:   198.18.0.0/30, fd00::/64, loopback") !=
        std::string::npos);
}

TEST_CASE("launch spec: --exit-codes, --termination-log and --exit-barrier-timeout",
          "[launch_spec]") {
  Fixture f;
  LaunchSpec plain = f.Spec({"x.py"});
  CHECK(plain.exit_scheme == ExitScheme::kRank);
  CHECK(plain.termination_log.empty());
  CHECK_FALSE(plain.exit_barrier_timeout_s.has_value());
  LaunchSpec classes = f.Spec({"--exit-codes", "classes", "--termination-log", "none", "x.py"});
  CHECK(classes.exit_scheme == ExitScheme::kClasses);
  CHECK(classes.termination_log == "none");
  f.env.Set("GCULAUNCH_EXIT_CODES", "classes");
  CHECK(f.Spec({"x.py"}).exit_scheme == ExitScheme::kClasses);
  CHECK(f.Spec({"--exit-codes", "rank", "x.py"}).exit_scheme == ExitScheme::kRank);
  f.env.Set("GCULAUNCH_EXIT_CODES", "both");
  CHECK(f.Err({"x.py"}) ==
        "gculaunch: GCULAUNCH_EXIT_CODES 'both': expected rank or classes (fix: e.g. "
        "GCULAUNCH_EXIT_CODES=classes)");
  f.env.Set("GCULAUNCH_EXIT_CODES", "");
  // The exit barrier: node 0's wait for the others' bye; one node has none (a note).
  LaunchSpec one = f.Spec({"--exit-barrier-timeout", "300", "x.py"});
  CHECK(one.exit_barrier_timeout_s == 300.0);
  CHECK(Notes(one).find("--exit-barrier-timeout (TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT): one node "
                        "has no exit barrier") != std::string::npos);
  f.env.Set("TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT", "45");
  LaunchSpec two =
      f.Spec({"--nnodes", "2", "--node-rank", "0", "--master-addr", "10.0.0.1", "x.py"});
  CHECK(two.exit_barrier_timeout_s == 45.0);
  CHECK(Notes(two).find("exit barrier") == std::string::npos);
  f.env.Set("TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT", "soon");
  CHECK(f.Err({"x.py"}).find("TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT 'soon': expected seconds") !=
        std::string::npos);
}

}  // namespace gculaunch
