#include "launcher/frontend/cpu_affinity.h"

#include <catch2/catch.hpp>

#include "launcher/frontend/cli.h"
#include "launcher/frontend/cpu_list.h"
#include "launcher/frontend/dry_run.h"
#include "launcher/frontend/launch_spec.h"
#include "launcher/frontend/rank_env.h"
#include "launcher/sys/device_probe.h"
#include "tests/support/frontend_fakes.h"

namespace gculaunch {
namespace {

using testing::FakeFileAccess;
using testing::TempDir;
using Cpus = std::vector<int>;

// A fake sysfs tree: two sockets, 8 cores each side of SMT pairs (cpu c and
// c+8 are siblings), node 0 = cores 0-3, node 1 = cores 4-7, and 8 Enflame
// cards laid out as Enflame's driver does (<pci device>/enflame/gcuN), cards
// 0-3 on node 0 and 4-7 on node 1.
struct Host {
  TempDir root;

  explicit Host(const std::string& online = "0-15", bool smt = true) {
    root.Write("sys/devices/system/cpu/online", online + "\n");
    root.Write("sys/devices/system/node/node0/cpulist", "0-3,8-11\n");
    root.Write("sys/devices/system/node/node1/cpulist", "4-7,12-15\n");
    root.Write("sys/devices/system/node/possible", "0-1\n");  // not a node directory
    if (smt) {
      for (int cpu = 0; cpu < 16; ++cpu) {
        const int core = cpu % 8;
        root.Write(
            "sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/thread_siblings_list",
            std::to_string(core) + "," + std::to_string(core + 8) + "\n");
      }
    }
  }
  void Cards(int n = 8) {
    for (int card = 0; card < n; ++card) {
      root.Write("dev/gcu" + std::to_string(card));
      const std::string bdf = "sys/bus/pci/devices/0000:" + std::to_string(10 + card) + ":00.0";
      root.Write(bdf + "/numa_node", card < 4 ? "0\n" : "1\n");
      root.Write(bdf + "/enflame/gcu" + std::to_string(card) + "/dev",
                 "240:" + std::to_string(card));
      root.Write(bdf + "/vendor", "0x1e36\n");
    }
    root.Write("dev/gcuctl");
  }
};

std::vector<std::optional<DeviceFile>> Cards(const std::vector<int>& ids) {
  std::vector<std::optional<DeviceFile>> cards;
  for (int id : ids) {
    if (id < 0) {
      cards.emplace_back(std::nullopt);
    } else {
      cards.emplace_back(DeviceFile{"/dev/gcu" + std::to_string(id), std::to_string(id)});
    }
  }
  return cards;
}

AffinityPlan Plan(const Host& host, CpuAffinity mode, int nproc,
                  const std::vector<std::optional<DeviceFile>>& cards) {
  FileSystemDeviceProbe probe(host.root.path());
  auto plan = PlanCpuAffinity(mode, nproc, cards, probe);
  if (!plan.ok()) FAIL(plan.error().Format());
  return std::move(*plan);
}

TEST_CASE("cpu affinity: numa gives each rank its card's node, split by cores", "[cpu_affinity]") {
  Host host;
  host.Cards();
  SECTION("8 ranks, 8 cards: one core (two threads) each") {
    const AffinityPlan plan = Plan(host, CpuAffinity::kNuma, 8, Cards({0, 1, 2, 3, 4, 5, 6, 7}));
    CHECK(plan.rank_cpus ==
          std::vector<Cpus>{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}});
    CHECK(plan.rank_where[5] == "NUMA node 1, card /dev/gcu5");
    CHECK(plan.notes ==
          std::vector<std::string>{"--cpu-affinity numa: local ranks 0,1,2,3 on NUMA node 0 (CPUs "
                                   "0-3,8-11)",
                                   "--cpu-affinity numa: local ranks 4,5,6,7 on NUMA node 1 (CPUs "
                                   "4-7,12-15)"});
  }
  SECTION("2 ranks on cards 0 and 1: both on node 0, half of it each") {
    const AffinityPlan plan = Plan(host, CpuAffinity::kNuma, 2, Cards({0, 1}));
    CHECK(plan.rank_cpus == std::vector<Cpus>{{0, 1, 8, 9}, {2, 3, 10, 11}});
  }
  SECTION("3 ranks on one node: blocks of 2, 1 and 1 cores") {
    const AffinityPlan plan = Plan(host, CpuAffinity::kNuma, 3, Cards({4, 4, 4}));
    CHECK(plan.rank_cpus == std::vector<Cpus>{{4, 5, 12, 13}, {6, 14}, {7, 15}});
  }
  SECTION("cards found through the PCI layout without character devices") {
    std::string how;
    FileSystemDeviceProbe probe(host.root.path());
    CHECK(CardNumaNode({"/dev/gcu6", "6"}, probe, &how) == 1);
    CHECK(how == "/sys/bus/pci/devices/0000:16:00.0/numa_node");
  }
}

TEST_CASE("cpu affinity: spread splits every CPU fairly", "[cpu_affinity]") {
  Host host;
  SECTION("3 ranks over 8 cores: 3, 3 and 2 cores with their siblings") {
    const AffinityPlan plan = Plan(host, CpuAffinity::kSpread, 3, {});
    CHECK(plan.rank_cpus ==
          std::vector<Cpus>{{0, 1, 2, 8, 9, 10}, {3, 4, 5, 11, 12, 13}, {6, 7, 14, 15}});
    CHECK(plan.rank_where[0] == "spread over all 16 CPUs 0-15");
    CHECK(plan.notes.empty());
  }
  SECTION("more ranks than cores: single CPUs") {
    const AffinityPlan plan = Plan(host, CpuAffinity::kSpread, 10, {});
    size_t total = 0;
    for (const Cpus& cpus : plan.rank_cpus) {
      CHECK((cpus.size() == 1 || cpus.size() == 2));
      total += cpus.size();
    }
    CHECK(total == 16);
    CHECK(plan.rank_cpus[0] == Cpus{0, 1});
    CHECK(plan.rank_cpus[9] == Cpus{15});
  }
  SECTION("more ranks than CPUs: they share, round-robin") {
    const AffinityPlan plan = Plan(host, CpuAffinity::kSpread, 20, {});
    CHECK(plan.rank_cpus[0] == Cpus{0});
    CHECK(plan.rank_cpus[15] == Cpus{15});
    CHECK(plan.rank_cpus[16] == Cpus{0});
    CHECK(plan.rank_cpus[19] == Cpus{3});
  }
  SECTION("without sibling information every CPU is a core") {
    Host flat("0-15", /*smt=*/false);
    const AffinityPlan plan = Plan(flat, CpuAffinity::kSpread, 2, {});
    CHECK(plan.rank_cpus ==
          std::vector<Cpus>{{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14, 15}});
  }
}

TEST_CASE("cpu affinity: only the CPUs gculaunch may use (cpuset)", "[cpu_affinity]") {
  Host host("0-5,8-13");
  host.Cards();
  const AffinityPlan plan = Plan(host, CpuAffinity::kNuma, 8, Cards({0, 1, 2, 3, 4, 5, 6, 7}));
  CHECK(plan.rank_cpus[0] == Cpus{0, 8});
  // Node 1 keeps 2 cores (4 CPUs) for 4 ranks: one CPU each.
  CHECK(plan.rank_cpus[4] == Cpus{4});
  CHECK(plan.rank_cpus[5] == Cpus{5});
  CHECK(plan.rank_cpus[6] == Cpus{12});
  CHECK(plan.rank_cpus[7] == Cpus{13});
  Host narrow("0-3");
  narrow.Cards();
  const AffinityPlan excluded =
      Plan(narrow, CpuAffinity::kNuma, 8, Cards({0, 1, 2, 3, 4, 5, 6, 7}));
  CHECK(excluded.rank_cpus[4] == Cpus{0});
  CHECK(std::find(excluded.notes.begin(), excluded.notes.end(),
                  "--cpu-affinity numa: NUMA node 1 of /dev/gcu4 has no CPU gculaunch may use "
                  "(cpuset); its ranks use all 4 CPUs 0-3") != excluded.notes.end());
}

TEST_CASE("cpu affinity: an unknown NUMA node falls back to all CPUs, with a note",
          "[cpu_affinity]") {
  Host host;
  host.Cards();
  host.root.Write("sys/bus/pci/devices/0000:10:00.0/numa_node", "-1\n");
  const AffinityPlan plan = Plan(host, CpuAffinity::kNuma, 2, Cards({0, 1}));
  CHECK(plan.rank_cpus == std::vector<Cpus>{{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
                                            {0, 1, 2, 3, 8, 9, 10, 11}});
  CHECK(plan.rank_where[0] == "all 16 CPUs 0-15 (NUMA node of /dev/gcu0 unknown)");
  CHECK(plan.rank_where[1] == "NUMA node 0, card /dev/gcu1");
  CHECK(plan.notes.front() ==
        "--cpu-affinity numa: no NUMA node found for /dev/gcu0 (numa_node missing or -1 in "
        "sysfs); those ranks share all 16 CPUs 0-15");
}

// A probe whose device files are character devices (a real host), which a
// test cannot create without privileges.
class CharDeviceProbe : public FileSystemDeviceProbe {
 public:
  using FileSystemDeviceProbe::FileSystemDeviceProbe;
  std::optional<std::pair<unsigned, unsigned>> CharDeviceNumber(
      const std::string& path) const override {
    if (path == "/dev/gcu3") return std::make_pair(240u, 3u);
    return std::nullopt;
  }
};

TEST_CASE("cpu affinity: the node through the character device's sysfs entry", "[cpu_affinity]") {
  Host host;
  host.root.Write("sys/dev/char/240:3/device/numa_node", "1\n");
  CharDeviceProbe probe(host.root.path());
  std::string how;
  CHECK(CardNumaNode({"/dev/gcu3", "3"}, probe, &how) == 1);
  CHECK(how == "/sys/dev/char/240:3/device/numa_node");
}

TEST_CASE("cpu affinity: NVIDIA cards through /proc/driver/nvidia", "[cpu_affinity]") {
  Host host;
  host.root.Write("proc/driver/nvidia/gpus/0000:3b:00.0/information",
                  "Model: \t\t NVIDIA H100\nIRQ:   \t\t 100\nDevice Minor: \t 0\n");
  host.root.Write("proc/driver/nvidia/gpus/0000:d8:00.0/information",
                  "Model: \t\t NVIDIA H100\nDevice Minor: \t 1\n");
  host.root.Write("sys/bus/pci/devices/0000:3b:00.0/numa_node", "0\n");
  host.root.Write("sys/bus/pci/devices/0000:d8:00.0/numa_node", "1\n");
  FileSystemDeviceProbe probe(host.root.path());
  CHECK(CardNumaNode({"/dev/nvidia1", "1"}, probe) == 1);
  CHECK(CardNumaNode({"/dev/nvidia0", "0"}, probe) == 0);
  CHECK_FALSE(CardNumaNode({"/dev/nvidia2", "2"}, probe).has_value());
}

TEST_CASE("cpu affinity: numa without cards spreads ranks over the nodes in blocks",
          "[cpu_affinity]") {
  Host host;
  const AffinityPlan plan = Plan(host, CpuAffinity::kNuma, 4, Cards({-1, -1, -1, -1}));
  CHECK(plan.rank_cpus ==
        std::vector<Cpus>{{0, 1, 8, 9}, {2, 3, 10, 11}, {4, 5, 12, 13}, {6, 7, 14, 15}});
  CHECK(plan.rank_where[2] == "NUMA node 1");
  TempDir no_nodes;
  no_nodes.Write("sys/devices/system/cpu/online", "0-3\n");
  FileSystemDeviceProbe probe(no_nodes.path());
  auto flat = PlanCpuAffinity(CpuAffinity::kNuma, 2, {}, probe);
  REQUIRE(flat.ok());
  CHECK(flat->rank_cpus == std::vector<Cpus>{{0, 1}, {2, 3}});
  CHECK(flat->notes == std::vector<std::string>{
                           "--cpu-affinity numa: no NUMA nodes in /sys/devices/system/node; the "
                           "ranks share all 4 CPUs 0-3 as with spread"});
}

class NoCpuProbe : public FileSystemDeviceProbe {
 public:
  NoCpuProbe() : FileSystemDeviceProbe("/nonexistent-root") {}
  std::vector<int> AllowedCpus() const override { return {}; }
};

TEST_CASE("cpu affinity: none plans nothing, no CPU at all is an error", "[cpu_affinity]") {
  Host host;
  CHECK(Plan(host, CpuAffinity::kNone, 4, {}).rank_cpus.empty());
  NoCpuProbe probe;
  auto plan = PlanCpuAffinity(CpuAffinity::kSpread, 2, {}, probe);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.error().Format() ==
        "gculaunch: --cpu-affinity spread: gculaunch may run on no CPU at all (empty affinity "
        "mask) (fix: use --cpu-affinity none)");
}

TEST_CASE("cpu affinity: in the launch spec, the rank environment and the dry run",
          "[cpu_affinity]") {
  Host host;
  host.Cards();
  FileSystemDeviceProbe probe(host.root.path());
  FakeFileAccess files;
  files.executables["python3"] = "/usr/bin/python3";
  EnvMap env{{"PATH", "/usr/bin"}};
  auto spec_of = [&](const std::vector<std::string>& args) {
    auto cli = ParseCli(args, env);
    REQUIRE(cli.ok());
    auto spec = MakeLaunchSpec(cli->options, env, probe, files);
    if (!spec.ok()) FAIL(spec.error().Format());
    return std::move(*spec);
  };
  const LaunchSpec spec = spec_of({"--device", "gcu", "--nproc-per-node", "8", "--cpu-affinity",
                                   "numa", "--dry-run", "train.py"});
  CHECK(spec.rank_cpus.size() == 8);
  const RankRuntime runtime = DryRunRuntime(spec);
  const EnvMap rank5 = BuildRankEnv(spec, env, 5, 0, runtime);
  CHECK(rank5.GetOr("GCULAUNCH_CPUS", "") == "5,13");
  CHECK(rank5.GetOr("OMP_NUM_THREADS", "") == "2");
  CHECK(std::find(spec.notes.begin(), spec.notes.end(),
                  "OMP_NUM_THREADS = each rank's CPU count (--cpu-affinity numa; set "
                  "OMP_NUM_THREADS to choose another value)") != spec.notes.end());
  const std::string table = RenderDryRun(spec, env);
  CHECK(table.find("rank 5 (local rank 5):\n  argv: /usr/bin/python3 -u train.py\n  cpus: 5,13 "
                   "(NUMA node 1, card /dev/gcu5)\n") != std::string::npos);

  SECTION("the user's OMP_NUM_THREADS wins") {
    env.Set("OMP_NUM_THREADS", "5");
    const LaunchSpec own = spec_of(
        {"--device", "gcu", "--nproc-per-node", "8", "--cpu-affinity", "spread", "train.py"});
    CHECK(BuildRankEnv(own, env, 0, 0, DryRunRuntime(own)).GetOr("OMP_NUM_THREADS", "") == "5");
  }
  SECTION("the pool from TOPS_VISIBLE_DEVICES picks the cards") {
    env.Set("TOPS_VISIBLE_DEVICES", "4,5,6,7");
    const LaunchSpec pool =
        spec_of({"--device", "gcu", "--nproc-per-node", "4", "--cpu-affinity", "numa", "train.py"});
    CHECK(pool.rank_cpus[0] == Cpus{4, 12});
    CHECK(pool.rank_cpus_where[3] == "NUMA node 1, card /dev/gcu7");
  }
  SECTION("without affinity: no GCULAUNCH_CPUS, torchrun's OMP default, even if inherited") {
    env.Set("GCULAUNCH_CPUS", "0-3");
    const LaunchSpec plain = spec_of({"--device", "gcu", "--nproc-per-node", "8", "train.py"});
    const EnvMap rank = BuildRankEnv(plain, env, 0, 0, DryRunRuntime(plain));
    CHECK_FALSE(rank.Has("GCULAUNCH_CPUS"));
    CHECK(rank.GetOr("OMP_NUM_THREADS", "") == "1");
  }
  SECTION("torchrun's --numa-binding is done as --cpu-affinity numa") {
    for (const char* mode : {"node", "socket", "exclusive", "core-complex"}) {
      INFO(mode);
      const LaunchSpec numa = spec_of({"--device", "gcu", "--nproc-per-node", "8", "--numa-binding",
                                       mode, "--dry-run", "train.py"});
      CHECK(numa.cpu_affinity == CpuAffinity::kNuma);
      CHECK(numa.rank_cpus == spec.rank_cpus);
      CHECK(std::find(numa.notes.begin(), numa.notes.end(),
                      "--numa-binding " + std::string(mode) +
                          " is done as --cpu-affinity numa: each rank is pinned to its share of "
                          "the CPUs of its card's NUMA node") != numa.notes.end());
    }
  }
  SECTION("bad values") {
    auto cli = ParseCli({"--cpu-affinity", "sockets", "train.py"}, env);
    REQUIRE_FALSE(cli.ok());
    CHECK(cli.error().Format() ==
          "gculaunch: --cpu-affinity 'sockets': expected none, numa or spread (fix: e.g. "
          "--cpu-affinity numa)");
  }
}

}  // namespace
}  // namespace gculaunch
