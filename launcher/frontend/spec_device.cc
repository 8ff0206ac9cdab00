// MakeLaunchSpec's device steps (spec_builder.h): the device profile, the card pool, the
// ranks per node, each rank's card and the CPU affinity.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "base/exit_codes.h"
#include "base/one_line.h"
#include "base/text.h"
#include "launcher/frontend/cli.h"
#include "launcher/frontend/job_file.h"
#include "launcher/frontend/platform.h"
#include "launcher/frontend/profile_catalog.h"
#include "launcher/frontend/rank_env.h"
#include "launcher/frontend/spec_builder.h"
#include "launcher/frontend/stack_hook.h"

namespace gculaunch {
namespace {

std::vector<std::string> Indices(int count) {
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) out.push_back(std::to_string(i));
  return out;
}

// "0-7" for 0..7, else the comma list.
std::string DescribePool(const std::vector<std::string>& pool) {
  if (pool.size() > 2 && pool == Indices(static_cast<int>(pool.size()))) {
    return "0-" + std::to_string(pool.size() - 1);
  }
  return Join(pool, ",");
}

// "/dev/gcuN" for the pattern "gcu([0-9]+)".
std::string DescribeDeviceFiles(const DeviceProfile& profile) {
  std::string pattern = profile.device_pattern;
  const std::string group = "([0-9]+)";
  if (const size_t at = pattern.find(group); at != std::string::npos) {
    pattern.replace(at, group.size(), "N");
  }
  return profile.device_dir + "/" + pattern;
}

// "no /dev/gcuN; driver /sys/module/enflame not loaded"
std::string DescribeMissingCards(const DeviceProfile& profile, const DeviceProbe& probe) {
  if (!profile.has_devices()) return "no " + profile.visible_env.front() + " in the environment";
  std::string out = "no " + DescribeDeviceFiles(profile);
  if (!profile.driver_path.empty()) {
    out += probe.Exists(profile.driver_path) ? "; driver " + profile.driver_path + " is loaded"
                                             : "; driver " + profile.driver_path + " not loaded";
  }
  return out;
}

}  // namespace

Status SpecBuilder::Device() {
  const std::string value = o_.device.value_or("auto");
  const std::string source = o_.Source("device");
  auto catalog = LoadProfileCatalog(ProfileSearchPath(env_), files_);
  if (!catalog.ok()) return catalog.error();
  if (value == "auto") {
    for (const DeviceProfile& candidate : catalog->profiles) {
      if (!candidate.has_devices()) continue;
      const size_t count = probe_.FindDevices(candidate).size();
      if (count == 0) continue;
      spec_.profile = candidate;
      Note("device " + candidate.name + ": --device auto found " + std::to_string(count) +
           " device files " + DescribeDeviceFiles(candidate));
      NoteProfileFile();
      return OkStatus();
    }
    auto cpu = FindProfile(*catalog, "cpu");
    if (!cpu.ok()) cpu = FindBuiltinProfile("cpu");
    spec_.profile = std::move(*cpu);
    Note("device cpu: --device auto found no accelerator device files");
    return OkStatus();
  }
  const bool is_file =
      value.find('/') != std::string::npos || value.ends_with(".yaml") || value.ends_with(".yml");
  if (is_file) {
    auto text = files_.ReadTextFile(value);
    if (!text.ok()) {
      return Error{source + ": " + text.error().what,
                   text.error().hint.empty()
                       ? "give an existing profile file, or one of " + ProfileNames(*catalog)
                       : text.error().hint};
    }
    auto profile = ParseDeviceProfile(*text, value);
    if (!profile.ok()) return profile.error();
    spec_.profile = std::move(*profile);
    Note("device " + spec_.profile.name + " from " + value);
    return OkStatus();
  }
  auto profile = FindProfile(*catalog, value);
  if (!profile.ok()) {
    return Error{source + " '" + value + "': " + profile.error().what, profile.error().hint};
  }
  spec_.profile = std::move(*profile);
  NoteProfileFile();
  return OkStatus();
}

// A profile from a profile directory (not compiled in) is worth a note.
void SpecBuilder::NoteProfileFile() {
  if (spec_.profile.source != "built-in" && !spec_.profile.source.empty()) {
    Note("device profile " + spec_.profile.name + " from " + spec_.profile.source);
  }
}

bool SpecBuilder::UsesCards() const {
  return spec_.profile.has_devices() || !spec_.profile.visible_env.empty();
}

Status SpecBuilder::Pool() {
  const DeviceProfile& profile = spec_.profile;
  if (!profile.container_visible_env.empty() && env_.Has(profile.container_visible_env)) {
    const std::string& var = profile.container_visible_env;
    const bool set_by_us = std::find(profile.visible_env.begin(), profile.visible_env.end(), var) !=
                           profile.visible_env.end();
    std::string note = var + "=" + env_.GetOr(var, "") +
                       " is the container runtime's variable: it does not choose cards inside "
                       "a running container; ";
    note += set_by_us ? "gculaunch sets it to the card pool"
                      : "the card pool comes from " + profile.visible_env.front() +
                            " or the device files";
    Note(note);
  }
  if (!profile.visible_env.empty() && env_.Has(profile.visible_env.front())) {
    const std::string& var = profile.visible_env.front();
    const std::string value = env_.GetOr(var, "");
    if (Trim(value).empty()) {
      return Error{var + " is set but empty: no cards are visible",
                   "unset " + var + " to use every card, or list cards such as " + var + "=0,1"};
    }
    std::set<std::string> seen;
    std::stringstream in(value);
    std::string item;
    while (std::getline(in, item, ',')) {
      item = Trim(item);
      const bool bad = std::any_of(item.begin(), item.end(), [](unsigned char c) {
        return std::isspace(c) != 0 || std::iscntrl(c) != 0;
      });
      if (item.empty() || bad || !seen.insert(item).second) {
        const std::string problem = item.empty() ? "empty entry"
                                    : bad        ? "'" + item + "' is not a card id"
                                                 : "card " + item + " is listed twice";
        return Error{var + "='" + value + "': " + problem,
                     "list each card once, e.g. " + var + "=0,1,2,3"};
      }
      spec_.device_pool.push_back(item);
    }
    if (value.back() == ',') {
      return Error{var + "='" + value + "': empty entry",
                   "list each card once, e.g. " + var + "=0,1,2,3"};
    }
    spec_.pool_source = var + "=" + value;
    Note("card pool " + Join(spec_.device_pool, ",") + " from " + var + " in the environment");
    return OkStatus();
  }
  if (profile.has_devices()) {
    const std::vector<DeviceFile> found = probe_.FindDevices(profile);
    if (!found.empty()) {
      // Runtime indices restart at 0 inside a container even when the
      // device files keep the host's minors (gcu4..gcu7): hand out indices.
      spec_.device_pool = Indices(static_cast<int>(found.size()));
      spec_.pool_source =
          std::to_string(found.size()) + " device files " + DescribeDeviceFiles(profile);
      std::vector<std::string> names;
      for (const DeviceFile& file : found) names.push_back(file.path);
      Note("card pool " + DescribePool(spec_.device_pool) + ": indices of the " +
           std::to_string(found.size()) + " device files " + Join(names, " "));
    }
  }
  return OkStatus();
}

// `what` names the input that needed cards; with `suggest_number` (nproc
// auto/gpu) the fix starts with giving a number.
Error SpecBuilder::NoCards(const std::string& what, bool suggest_number) const {
  return Error{what + ": no " + spec_.profile.name + " cards found (" +
                   DescribeMissingCards(spec_.profile, probe_) + ")",
               suggest_number
                   ? "give a number such as --nproc-per-node 8 (--dry-run then previews "
                     "without cards), check the driver and the container's device mounts, or "
                     "use --device cpu"
                   : "check the driver and the container's device mounts, or use --device "
                     "cpu (--dry-run previews without cards)"};
}

Status SpecBuilder::Nproc() {
  const NprocPerNode n = o_.nproc_per_node.value_or(NprocPerNode{});
  const std::string source = o_.Source("nproc-per-node");
  switch (n.kind) {
    case NprocPerNode::Kind::kCount:
      spec_.nproc_per_node = n.count;
      break;
    case NprocPerNode::Kind::kCpu:
      spec_.nproc_per_node = probe_.CpuCount();
      Note("nproc-per-node " + std::to_string(spec_.nproc_per_node) + ": the CPUs available");
      break;
    case NprocPerNode::Kind::kAuto:
    case NprocPerNode::Kind::kGpu: {
      const std::string what =
          source + " " + (n.kind == NprocPerNode::Kind::kAuto ? "auto" : "gpu");
      if (!UsesCards()) {
        if (n.kind == NprocPerNode::Kind::kGpu) {
          return Error{what + ": the device profile " + spec_.profile.name + " has no cards",
                       "give a number, or choose a device with --device"};
        }
        spec_.nproc_per_node = probe_.CpuCount();
        Note("nproc-per-node " + std::to_string(spec_.nproc_per_node) + ": auto with device " +
             spec_.profile.name + " counts the CPUs available");
        break;
      }
      if (spec_.device_pool.empty()) return NoCards(what, /*suggest_number=*/true);
      spec_.nproc_per_node = static_cast<int>(spec_.device_pool.size());
      Note("nproc-per-node " + std::to_string(spec_.nproc_per_node) + ": one rank per card");
      break;
    }
  }
  const long long world = static_cast<long long>(spec_.nnodes) * spec_.nproc_per_node;
  if (world > (1LL << 24)) {
    return Error{std::to_string(spec_.nnodes) + " nodes x " + std::to_string(spec_.nproc_per_node) +
                     " ranks is more than " + std::to_string(1LL << 24) + " ranks",
                 "check " + o_.Source("nnodes") + " and " + source};
  }
  spec_.rank_offset = spec_.node_rank * spec_.nproc_per_node;
  spec_.world_size = static_cast<int>(world);
  return OkStatus();
}

Status SpecBuilder::Cards() {
  spec_.bind = o_.bind.value_or(DeviceBind::kAll);
  if (Status virtual_rank = VirtualLocalRank(); !virtual_rank.ok()) return virtual_rank;
  const int nproc = spec_.nproc_per_node;
  if (!UsesCards()) {
    if (spec_.bind == DeviceBind::kRank && !spec_.virtual_local_rank) {
      Note(o_.Source("bind") + " rank has no effect: device " + spec_.profile.name +
           " has no cards");
    }
    return OkStatus();
  }
  if (spec_.device_pool.empty()) {
    if (!spec_.dry_run) {
      return NoCards(o_.Source("device") + " " + o_.device.value_or(spec_.profile.name),
                     /*suggest_number=*/false);
    }
    spec_.device_pool = Indices(nproc);
    spec_.pool_source = "assumed for the dry run";
    Note("no " + spec_.profile.name + " cards found (" +
         DescribeMissingCards(spec_.profile, probe_) + "): previewing as if cards " +
         DescribePool(spec_.device_pool) + " were present");
    return OkStatus();
  }
  const int cards = static_cast<int>(spec_.device_pool.size());
  if (nproc <= cards) return OkStatus();
  if (spec_.bind == DeviceBind::kRank) {
    const std::string flag =
        spec_.virtual_local_rank ? o_.Source("virtual-local-rank") : o_.Source("bind") + " rank";
    Error error{flag + ": " + std::to_string(nproc) + " ranks need " + std::to_string(nproc) +
                    " cards but the pool has " + std::to_string(cards) + " (" + spec_.pool_source +
                    ")",
                "use --nproc-per-node " + std::to_string(cards) + " or fewer, or " +
                    (spec_.virtual_local_rank ? std::string("give the pool more cards")
                                              : std::string("--bind all"))};
    if (!spec_.dry_run) return error;
    Note(error.what + "; a real launch stops here");
  } else {
    Note(std::to_string(nproc) + " ranks on " + std::to_string(cards) +
         " cards: ranks share cards round-robin (GCULAUNCH_DEVICE)");
  }
  return OkStatus();
}

// --virtual-local-rank, as torch 2.10's LocalElasticAgent does it: every rank gets
// LOCAL_RANK=0 and sees only its own card, the pool's entry for its local rank (torch maps
// the rank through CUDA_VISIBLE_DEVICES when it is set, else uses the rank's number; the
// pool is exactly that here), in each of the profile's visible-devices variables.  Done as
// --bind rank plus the LOCAL_RANK rule (BuildRankEnv).
Status SpecBuilder::VirtualLocalRank() {
  if (!o_.virtual_local_rank) return OkStatus();
  const std::string flag = o_.Source("virtual-local-rank");
  if (o_.bind == DeviceBind::kAll) {
    return Error{flag + " and " + o_.Source("bind") +
                     " all conflict: a virtual local rank sees only its own card",
                 "drop one of them"};
  }
  spec_.virtual_local_rank = true;
  spec_.bind = DeviceBind::kRank;
  const DeviceProfile& profile = spec_.profile;
  if (!UsesCards()) {
    Note(flag + " with device " + profile.name +
         ": every rank gets LOCAL_RANK=0; there is no card to hide, so no visible-devices "
         "variable is set (torchrun would still set CUDA_VISIBLE_DEVICES to the rank's local "
         "rank, which only CUDA reads); RANK and GCULAUNCH_* keep telling the ranks apart");
    return OkStatus();
  }
  const std::string vars = profile.visible_env.empty()
                               ? std::string("no visible-devices variable (the profile has none)")
                               : Join(profile.visible_env, " and ");
  Note(flag +
       ": every rank gets LOCAL_RANK=0 and sees only its own card, the pool's entry for "
       "its local rank, in " +
       vars + " (device index 0, GCULAUNCH_DEVICE_INDEX=0), as torch 2.10+ does");
  return OkStatus();
}

// The card (device file) each local rank uses, for --cpu-affinity numa.
std::vector<std::optional<DeviceFile>> SpecBuilder::RankCards() const {
  std::vector<std::optional<DeviceFile>> cards(static_cast<size_t>(spec_.nproc_per_node));
  const auto& pool = spec_.device_pool;
  if (pool.empty() || !spec_.profile.has_devices()) return cards;
  const std::vector<DeviceFile> found = probe_.FindDevices(spec_.profile);
  for (int rank = 0; rank < spec_.nproc_per_node; ++rank) {
    const size_t slot = spec_.bind == DeviceBind::kRank ? static_cast<size_t>(rank)
                                                        : static_cast<size_t>(rank) % pool.size();
    if (slot >= pool.size()) continue;
    const std::string& id = pool[slot];
    // Card ids that are not small numbers (DRS-<uuid>) name no device file.
    if (id.empty() || id.size() > 6 ||
        !std::all_of(id.begin(), id.end(), [](unsigned char c) { return std::isdigit(c) != 0; })) {
      continue;
    }
    const size_t index = std::stoul(id);
    if (index < found.size()) cards[static_cast<size_t>(rank)] = found[index];
  }
  return cards;
}

Status SpecBuilder::Affinity() {
  spec_.cpu_affinity = o_.cpu_affinity.value_or(CpuAffinity::kNone);
  if (o_.numa_binding) {
    const std::string given = DescribeFlag(o_, "numa-binding", *o_.numa_binding);
    if (o_.cpu_affinity) {
      Note(given + " is ignored: " + o_.Source("cpu-affinity") + " decides the CPU binding");
    } else {
      spec_.cpu_affinity = CpuAffinity::kNuma;
      Note(given +
           " is done as --cpu-affinity numa: each rank is pinned to its share of the "
           "CPUs of its card's NUMA node");
    }
  }
  if (spec_.cpu_affinity == CpuAffinity::kNone) return OkStatus();
  auto plan = PlanCpuAffinity(spec_.cpu_affinity, spec_.nproc_per_node, RankCards(), probe_);
  if (!plan.ok()) return plan.error();
  spec_.rank_cpus = std::move(plan->rank_cpus);
  spec_.rank_cpus_where = std::move(plan->rank_where);
  for (std::string& note : plan->notes) Note(std::move(note));
  return OkStatus();
}

}  // namespace gculaunch
