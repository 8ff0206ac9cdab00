#include "launcher/frontend/cpu_affinity.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <map>
#include <regex>
#include <set>

#include "base/text.h"
#include "launcher/frontend/cpu_list.h"

namespace gculaunch {
namespace {

std::string BaseName(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

std::vector<int> Intersect(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> out;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

std::optional<int> NodeFile(const DeviceProbe& probe, const std::string& path) {
  auto text = probe.ReadFile(path);
  if (!text) return std::nullopt;
  const auto value = ParseInteger(Trim(*text));
  if (!value || *value < INT_MIN || *value > INT_MAX) return std::nullopt;
  return static_cast<int>(*value);
}

// NUMA node -> the node's CPUs (from /sys/devices/system/node/nodeN/cpulist).
std::map<int, std::vector<int>> NumaNodes(const DeviceProbe& probe) {
  std::map<int, std::vector<int>> nodes;
  static const std::regex kNode("node([0-9]+)");
  for (const std::string& name : probe.ListDir("/sys/devices/system/node")) {
    std::smatch match;
    if (!std::regex_match(name, match, kNode)) continue;
    auto text = probe.ReadFile("/sys/devices/system/node/" + name + "/cpulist");
    if (!text) continue;
    if (auto cpus = ParseCpuList(*text)) nodes[std::stoi(match[1].str())] = *cpus;
  }
  return nodes;
}

}  // namespace

const char* CpuAffinityName(CpuAffinity mode) {
  switch (mode) {
    case CpuAffinity::kNone:
      return "none";
    case CpuAffinity::kNuma:
      return "numa";
    case CpuAffinity::kSpread:
      return "spread";
  }
  return "none";
}

std::optional<int> CardNumaNode(const DeviceFile& card, const DeviceProbe& probe,
                                std::string* how) {
  auto found = [&](std::optional<int> node, const std::string& path) -> std::optional<int> {
    if (how != nullptr) *how = path;
    if (!node || *node < 0) return std::nullopt;
    return node;
  };
  if (auto number = probe.CharDeviceNumber(card.path)) {
    const std::string path = "/sys/dev/char/" + std::to_string(number->first) + ":" +
                             std::to_string(number->second) + "/device/numa_node";
    if (auto node = NodeFile(probe, path)) return found(node, path);
  }
  const std::string name = BaseName(card.path);
  const std::string pci = "/sys/bus/pci/devices";
  for (const std::string& bdf : probe.ListDir(pci)) {
    for (const std::string& sub : probe.ListDir(pci + "/" + bdf)) {
      if (!probe.Exists(pci + "/" + bdf + "/" + sub + "/" + name)) continue;
      const std::string path = pci + "/" + bdf + "/numa_node";
      if (auto node = NodeFile(probe, path)) return found(node, path);
    }
  }
  static const std::regex kNvidia("nvidia([0-9]+)");
  std::smatch match;
  if (std::regex_match(name, match, kNvidia)) {
    const std::string gpus = "/proc/driver/nvidia/gpus";
    static const std::regex kMinor("Device Minor:[ \t]*([0-9]+)");
    for (const std::string& bdf : probe.ListDir(gpus)) {
      auto info = probe.ReadFile(gpus + "/" + bdf + "/information");
      std::smatch minor;
      if (!info || !std::regex_search(*info, minor, kMinor) || minor[1].str() != match[1].str()) {
        continue;
      }
      const std::string path = pci + "/" + bdf + "/numa_node";
      if (auto node = NodeFile(probe, path)) return found(node, path);
    }
  }
  return std::nullopt;
}

std::vector<std::vector<int>> SplitCpusFairly(const std::vector<int>& cpus, int parts,
                                              const DeviceProbe& probe) {
  std::vector<std::vector<int>> out(static_cast<size_t>(std::max(parts, 0)));
  if (parts <= 0 || cpus.empty()) return out;
  // Cores in the order of their first CPU; each holds its threads among `cpus`.
  std::map<int, std::vector<int>> by_core;  // lowest sibling -> threads
  for (int cpu : cpus) {
    int core = cpu;
    auto text = probe.ReadFile("/sys/devices/system/cpu/cpu" + std::to_string(cpu) +
                               "/topology/thread_siblings_list");
    if (text) {
      if (auto siblings = ParseCpuList(*text); siblings && !siblings->empty()) {
        core = siblings->front();
      }
    }
    by_core[core].push_back(cpu);
  }
  std::vector<std::vector<int>> cores;
  for (auto& [core, threads] : by_core) cores.push_back(threads);
  std::sort(cores.begin(), cores.end());

  auto cut = [&](const std::vector<std::vector<int>>& units) {
    const size_t n = units.size();
    const size_t base = n / static_cast<size_t>(parts);
    const size_t extra = n % static_cast<size_t>(parts);
    size_t at = 0;
    for (size_t part = 0; part < out.size(); ++part) {
      const size_t take = base + (part < extra ? 1 : 0);
      for (size_t i = 0; i < take; ++i, ++at) {
        out[part].insert(out[part].end(), units[at].begin(), units[at].end());
      }
      std::sort(out[part].begin(), out[part].end());
    }
  };
  if (static_cast<size_t>(parts) <= cores.size()) {
    cut(cores);
  } else if (static_cast<size_t>(parts) <= cpus.size()) {
    std::vector<std::vector<int>> singles;
    for (int cpu : cpus) singles.push_back({cpu});
    cut(singles);
  } else {
    for (size_t part = 0; part < out.size(); ++part) out[part] = {cpus[part % cpus.size()]};
  }
  return out;
}

namespace {

// Local ranks that share a CPU set, split among them at the end (SplitGroups).
class RankGroups {
 public:
  explicit RankGroups(AffinityPlan& plan) : plan_(plan) {}

  /// Local rank `rank` joins group `key` (a NUMA node, or -1 for "all CPUs"), whose CPUs are
  /// `cpus`; `where` is what its line says.
  void Add(int key, const std::vector<int>& cpus, const std::string& where, int rank) {
    Group& group = groups_[key];
    if (group.ranks.empty()) group.cpus = cpus;
    group.ranks.push_back(rank);
    plan_.rank_where[static_cast<size_t>(rank)] = where;
  }

  /// Every group's CPUs split fairly among its ranks, with a note per NUMA node.
  void SplitGroups(const DeviceProbe& probe) {
    for (auto& [key, group] : groups_) {
      const auto parts = SplitCpusFairly(group.cpus, static_cast<int>(group.ranks.size()), probe);
      for (size_t i = 0; i < group.ranks.size(); ++i) {
        plan_.rank_cpus[static_cast<size_t>(group.ranks[i])] = parts[i];
      }
      if (key >= 0) {
        plan_.notes.push_back("--cpu-affinity numa: local ranks " + JoinInts(group.ranks, ",") +
                              " on NUMA node " + std::to_string(key) + " (CPUs " +
                              FormatCpuList(group.cpus) + ")");
      }
    }
  }

  AffinityPlan& plan() { return plan_; }

 private:
  struct Group {
    std::vector<int> cpus;
    std::vector<int> ranks;
  };
  AffinityPlan& plan_;
  std::map<int, Group> groups_;
};

// What --cpu-affinity numa looks at: the NUMA nodes and the CPUs gculaunch may use.
struct NumaView {
  std::map<int, std::vector<int>> nodes;
  std::vector<int> allowed;
  std::string all;  ///< "all 16 CPUs 0-15", for the lines

  std::vector<int> CpusOf(int node) const {
    auto it = nodes.find(node);
    return it == nodes.end() ? std::vector<int>{} : Intersect(it->second, allowed);
  }
};

// No cards: ranks in blocks over the nodes that have CPUs for gculaunch.
void PlaceWithoutCards(int nproc, const NumaView& numa, RankGroups& groups) {
  std::vector<int> usable;
  for (const auto& [node, cpus] : numa.nodes) {
    if (!numa.CpusOf(node).empty()) usable.push_back(node);
  }
  if (usable.empty()) {
    groups.plan().notes.push_back(
        "--cpu-affinity numa: no NUMA nodes in /sys/devices/system/node; "
        "the ranks share " +
        numa.all + " as with spread");
    for (int rank = 0; rank < nproc; ++rank) groups.Add(-1, numa.allowed, numa.all, rank);
    return;
  }
  for (int rank = 0; rank < nproc; ++rank) {
    const int node = usable[static_cast<size_t>(rank) * usable.size() / static_cast<size_t>(nproc)];
    groups.Add(node, numa.CpusOf(node), "NUMA node " + std::to_string(node), rank);
  }
}

// Each rank on its card's NUMA node; a rank whose card's node is unknown, or has no CPU
// gculaunch may use, shares every CPU (one note names those cards).
void PlaceByCards(int nproc, const std::vector<std::optional<DeviceFile>>& rank_cards,
                  const NumaView& numa, const DeviceProbe& probe, RankGroups& groups) {
  std::vector<std::string> unknown;
  for (int rank = 0; rank < nproc; ++rank) {
    const auto& card = static_cast<size_t>(rank) < rank_cards.size()
                           ? rank_cards[static_cast<size_t>(rank)]
                           : std::nullopt;
    std::optional<int> node;
    if (card) node = CardNumaNode(*card, probe);
    std::vector<int> cpus = node ? numa.CpusOf(*node) : std::vector<int>{};
    if (node && cpus.empty()) {
      groups.plan().notes.push_back("--cpu-affinity numa: NUMA node " + std::to_string(*node) +
                                    " of " + card->path +
                                    " has no CPU gculaunch may use (cpuset); "
                                    "its ranks use " +
                                    numa.all);
      node.reset();
    }
    if (!node) {
      if (card) unknown.push_back(card->path);
      groups.Add(-1, numa.allowed,
                 numa.all + (card ? " (NUMA node of " + card->path + " unknown)" : ""), rank);
      continue;
    }
    groups.Add(*node, cpus, "NUMA node " + std::to_string(*node) + ", card " + card->path, rank);
  }
  if (unknown.empty()) return;
  std::sort(unknown.begin(), unknown.end());
  unknown.erase(std::unique(unknown.begin(), unknown.end()), unknown.end());
  std::string list;
  for (const std::string& path : unknown) list += (list.empty() ? "" : " ") + path;
  groups.plan().notes.push_back("--cpu-affinity numa: no NUMA node found for " + list +
                                " (numa_node missing or -1 in sysfs); those ranks share " +
                                numa.all);
}

}  // namespace

Result<AffinityPlan> PlanCpuAffinity(CpuAffinity mode, int nproc,
                                     const std::vector<std::optional<DeviceFile>>& rank_cards,
                                     const DeviceProbe& probe) {
  AffinityPlan plan;
  if (mode == CpuAffinity::kNone || nproc <= 0) return plan;
  NumaView numa;
  numa.allowed = probe.AllowedCpus();
  if (numa.allowed.empty()) {
    return Error{"--cpu-affinity " + std::string(CpuAffinityName(mode)) +
                     ": gculaunch may run on no CPU at all (empty affinity mask)",
                 "use --cpu-affinity none"};
  }
  plan.rank_cpus.resize(static_cast<size_t>(nproc));
  plan.rank_where.resize(static_cast<size_t>(nproc));
  numa.all = "all " + std::to_string(numa.allowed.size()) + " CPUs " + FormatCpuList(numa.allowed);
  RankGroups groups(plan);
  if (mode == CpuAffinity::kSpread) {
    for (int rank = 0; rank < nproc; ++rank) {
      groups.Add(-1, numa.allowed, "spread over " + numa.all, rank);
    }
  } else {
    numa.nodes = NumaNodes(probe);
    const bool any_card = std::any_of(rank_cards.begin(), rank_cards.end(),
                                      [](const auto& card) { return card.has_value(); });
    if (any_card) {
      PlaceByCards(nproc, rank_cards, numa, probe, groups);
    } else {
      PlaceWithoutCards(nproc, numa, groups);
    }
  }
  groups.SplitGroups(probe);
  return plan;
}

}  // namespace gculaunch
