// CPU affinity of the ranks (--cpu-affinity none|numa|spread): which CPUs
// each local rank may run on, decided up front as plain data.
//
//   none    gculaunch leaves affinity alone (the ranks inherit its own mask).
//   numa    each rank gets the CPUs of its card's NUMA node, split fairly
//           among the ranks on that node.  Without cards (the cpu profile)
//           the ranks are spread over the NUMA nodes in blocks (ranks 0..k-1 on
//           node 0, ...), then split within each node.
//   spread  all CPUs split fairly among the ranks.
//
// "All CPUs" means the CPUs gculaunch itself may use (its affinity mask, so a
// container's cpuset is honoured); a node's CPUs are intersected with them.
// Fair split: CPUs are grouped into cores (sysfs thread_siblings_list; a CPU
// without that file is its own core), the cores are cut into contiguous
// blocks whose sizes differ by at most one, and each rank gets all threads of
// its cores.  More ranks than cores: single CPUs are handed out instead; more
// ranks than CPUs: rank i gets CPU i mod n (ranks share).
//
// Finding a card's NUMA node, in order (all read through the DeviceProbe,
// i.e. below --sysroot):
//   1. the device file is a character device M:m -> /sys/dev/char/M:m/device/numa_node
//      (works for any driver that registers its device nodes with sysfs, e.g.
//      Enflame's <pci device>/enflame/gcuN);
//   2. a directory named like the device file one level below a PCI device:
//      /sys/bus/pci/devices/<bdf>/<class>/<name> -> <bdf>/numa_node (the same
//      layout, found without a character device: fake trees, odd containers);
//   3. NVIDIA: /proc/driver/nvidia/gpus/<bdf>/information "Device Minor: N"
//      for /dev/nvidiaN -> /sys/bus/pci/devices/<bdf>/numa_node.
// A node of -1 (no NUMA information) or a card not found: that rank's CPUs
// come from all CPUs instead, and a note says so.  A card id in the pool is
// read as an index into the profile's device files in numeric order (the
// same order gculaunch numbers cards in).
//
// The plan is applied in each rank's child process before exec
// (sys/child_setup.h: sched_setaffinity, no numactl).  With affinity on,
// OMP_NUM_THREADS defaults to the rank's CPU count (rank_env.h); the user's
// own value always wins.
//
// Thread safety: PlanCpuAffinity is a pure function of its inputs and the
// probe's answers.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "launcher/frontend/device_profile.h"
#include "launcher/frontend/types.h"

namespace gculaunch {

struct AffinityPlan {
  std::vector<std::vector<int>> rank_cpus;  ///< per local rank, ascending; empty with kNone
  std::vector<std::string> rank_where;      ///< per local rank: "NUMA node 1, card /dev/gcu5"
  std::vector<std::string> notes;           ///< explanations for the dry run and the log
};

/// The plan for `nproc` local ranks.  `rank_cards[i]` is local rank i's device
/// file, or nullopt when it has none (cpu profile, card unknown).
/// Error only when there is no CPU to give (an empty affinity mask).
Result<AffinityPlan> PlanCpuAffinity(CpuAffinity mode, int nproc,
                                     const std::vector<std::optional<DeviceFile>>& rank_cards,
                                     const DeviceProbe& probe);

/// The NUMA node of a card, by the look-ups above; nullopt when unknown.
/// `how` (may be null) receives which look-up found it.
std::optional<int> CardNumaNode(const DeviceFile& card, const DeviceProbe& probe,
                                std::string* how = nullptr);

/// `cpus` split into `parts` fair blocks as described above.
std::vector<std::vector<int>> SplitCpusFairly(const std::vector<int>& cpus, int parts,
                                              const DeviceProbe& probe);

/// "none", "numa", "spread".
const char* CpuAffinityName(CpuAffinity mode);

}  // namespace gculaunch
