// Internal to MakeLaunchSpec: SpecBuilder, which decides a LaunchSpec step by step.  Its steps
// live in launch_spec.cc (Build, MakeLaunchSpec), spec_topology.cc, spec_device.cc and
// spec_program.cc; nothing else includes this header (other modules use launch_spec.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/env_map.h"
#include "base/error.h"
#include "launcher/frontend/cli.h"
#include "launcher/frontend/device_profile.h"
#include "launcher/frontend/launch_spec.h"
#include "launcher/frontend/platform.h"

namespace gculaunch {

// Where each value of the layout came from, as the layout line names it
// ("--nnodes 2", "PET_NODE_RANK=1", "WORLD_SIZE=2 (nodes)", "MASTER_ADDR");
// empty: gculaunch's default (or, for the port, chosen at launch).
struct LayoutSources {
  std::string nnodes;
  std::string node_rank;
  std::string master_addr;
  std::string master_port;
};

// The layout line's sources: "(from WORLD_SIZE=2 (nodes), RANK=1, MASTER_ADDR, MASTER_PORT)",
// or "(defaults)" when nothing was given.
std::string FormatLayoutSources(const LayoutSources& from);

// Everything MakeLaunchSpec decides, step by step; each step may fail with
// an Error naming the flag or variable.
class SpecBuilder {
 public:
  SpecBuilder(const CliOptions& o, const EnvMap& env, const DeviceProbe& probe,
              const FileAccess& files, const PlatformInfo& platform)
      : o_(o), env_(env), probe_(probe), files_(files), platform_(platform) {
    spec_.dry_run = o.dry_run;
    spec_.notes = platform.notes;
    spec_.warnings = platform.warnings;
  }

  Result<LaunchSpec> Build();

 private:
  void Note(std::string note) { spec_.notes.push_back(std::move(note)); }

  // ---- nodes, rendezvous, master and the store's ports (spec_topology.cc) ----
  Status Topology();
  Status Rendezvous();
  Status BackendCan() const;
  Status Master();
  void StandaloneMaster();
  void EndpointMaster();
  Status ElectedMaster();
  Status FlagsMaster();
  Status StorePorts();
  void RankAtRendezvous(bool rank_given);
  void ElasticStore(bool rank_given);
  void RendezvousTimeout();
  // ---- the device, the card pool, ranks per node, cards and CPUs (spec_device.cc) ----
  Status Device();
  void NoteProfileFile();
  bool UsesCards() const;
  Status Pool();
  Error NoCards(const std::string& what, bool suggest_number) const;
  Status Nproc();
  Status Cards();
  Status VirtualLocalRank();
  std::vector<std::optional<DeviceFile>> RankCards() const;
  Status Affinity();
  // ---- the program, hangs, the environment, output, metrics, the store's access and the rest
  // (spec_program.cc) ----
  std::string SearchPath() const;
  Result<std::string> Resolve(const std::string& name, Error missing, Error not_executable);
  Status Program();
  Status Hangs();
  void StackDumps();
  void WarmRanks();
  Status PythonShim();
  static std::string OwnedHint(const std::string& var, const DeviceProfile& profile);
  Status Environment();
  /// --redirects/--tee for this node: entries naming local ranks it does not run are dropped
  /// with a warning (torchrun ignores them: launch lines written for 8 cards run on fewer).
  StdStreams LocalStreams(const std::string& name, const std::optional<StdStreams>& streams);
  Status Output();
  void LogLinePrefix();
  Status Metrics();
  Status StoreAccess();
  Status StoreProxy();
  Status Extras();
  Status LoopStop();
  Status Health();
  Status ExitCodes();
  Status ExitBarrier();
  void DeviceMemoryWait();
  void SignalsToHandle(const std::vector<std::string>& names);

  const CliOptions& o_;
  const EnvMap& env_;
  const DeviceProbe& probe_;
  const FileAccess& files_;
  const PlatformInfo& platform_;
  LaunchSpec spec_;
  LayoutSources from_;  ///< where the layout line says each value came from
};

}  // namespace gculaunch
