#include "launcher/frontend/launch_spec.h"

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
#include "launcher/frontend/stack_hook.h"

namespace gculaunch {
namespace {

constexpr int kDefaultMasterPort = 29500;    // torchrun's --master_port default
constexpr int kDefaultEndpointPort = 29400;  // torchrun's c10d endpoint default
constexpr const char* kDefaultMasterAddr = "127.0.0.1";
// glibc's default search path (confstr(_CS_PATH)), used when PATH is unset,
// as execvp does.
constexpr const char* kDefaultPath = "/bin:/usr/bin";

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

// Where each value of the layout came from, as the layout line names it
// ("--nnodes 2", "PET_NODE_RANK=1", "WORLD_SIZE=2 (nodes)", "MASTER_ADDR");
// empty: gculaunch's default (or, for the port, chosen at launch).
struct LayoutSources {
  std::string nnodes;
  std::string node_rank;
  std::string master_addr;
  std::string master_port;
};

// "layout: 2 nodes x 8 ranks, node 1, master node0:29500 (from WORLD_SIZE=2
// (nodes), RANK=1, MASTER_ADDR, MASTER_PORT)"; "(defaults)" when nothing was
// given.  An IPv6 master is written [addr]:port.
std::string FormatLayout(const LaunchSpec& spec, const LayoutSources& from) {
  const std::string host = spec.master_addr.find(':') != std::string::npos
                               ? "[" + spec.master_addr + "]"
                               : spec.master_addr;
  // Multi-node: the port node 0's gculaunch meets the other nodes on (which the ranks'
  // MASTER_PORT differs from only with --no-agent-store).
  const int shown = spec.agent_port != 0 ? spec.agent_port : spec.master_port;
  const std::string port = shown != 0 ? std::to_string(shown) : "<port chosen at launch>";
  std::string line = "layout: " + Plural(spec.nnodes, "node") + " x " +
                     Plural(spec.nproc_per_node, "rank") + ", node " +
                     std::to_string(spec.node_rank) + ", master " + host + ":" + port;
  if (spec.etcd) {
    // Every node is alike: the leader of each term hosts the ranks' store (docs/etcd.md).
    const std::string count = spec.elastic() ? std::to_string(spec.min_nodes) + " to " +
                                                   std::to_string(spec.nnodes) + " nodes (elastic)"
                                             : Plural(spec.nnodes, "node");
    line = "layout: " + count + " x " + Plural(spec.nproc_per_node, "rank") +
           ", rendezvous in etcd at " + Join(spec.etcd->endpoints, ",") + " under " +
           spec.etcd->key_prefix + ", node rank assigned at rendezvous, the leader of each term " +
           "hosts the ranks' store on port " + port;
  } else if (spec.elastic()) {
    // Node ranks come from the rendezvous: each epoch's layout line names them.
    const std::string who = !spec.store_host   ? "the node the endpoint names hosts the store"
                            : *spec.store_host ? "this node hosts the store"
                                               : "another node hosts the store";
    line = "layout: " + std::to_string(spec.min_nodes) + " to " + std::to_string(spec.nnodes) +
           " nodes (elastic) x " + Plural(spec.nproc_per_node, "rank") +
           ", node rank assigned at rendezvous, " + who + ", master " + host + ":" + port;
  }
  std::vector<std::string> sources;
  for (const std::string* source :
       {&from.nnodes, &from.node_rank, &from.master_addr, &from.master_port}) {
    if (!source->empty() && std::find(sources.begin(), sources.end(), *source) == sources.end()) {
      sources.push_back(*source);
    }
  }
  return line + (sources.empty() ? " (defaults)" : " (from " + Join(sources, ", ") + ")");
}

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

  Result<LaunchSpec> Build() {
    for (Status (SpecBuilder::*step)() :
         {&SpecBuilder::Topology, &SpecBuilder::Rendezvous, &SpecBuilder::Master,
          &SpecBuilder::StorePorts, &SpecBuilder::Device, &SpecBuilder::Pool, &SpecBuilder::Nproc,
          &SpecBuilder::Cards, &SpecBuilder::Affinity, &SpecBuilder::Program,
          &SpecBuilder::Environment, &SpecBuilder::Output, &SpecBuilder::Extras,
          &SpecBuilder::Metrics, &SpecBuilder::StoreAccess}) {
      if (Status ok = (this->*step)(); !ok.ok()) return ok.error();
    }
    spec_.layout = FormatLayout(spec_, from_);
    if (spec_.elastic()) {
      Note(
          "elastic: WORLD_SIZE, RANK, GROUP_RANK, GROUP_WORLD_SIZE, ROLE_RANK, "
          "ROLE_WORLD_SIZE and TORCHELASTIC_RESTART_COUNT follow each epoch's plan and may "
          "change from one epoch to the next; shown here for node rank " +
          std::to_string(spec_.node_rank) + " of " + std::to_string(spec_.nnodes) + " nodes");
    } else if (spec_.nnodes > 1) {
      Note("ranks " + std::to_string(spec_.rank_offset) + "-" +
           std::to_string(spec_.rank_offset + spec_.nproc_per_node - 1) + " of " +
           std::to_string(spec_.world_size) + " assume " + std::to_string(spec_.nproc_per_node) +
           " ranks on every node (RANK = node rank x " + std::to_string(spec_.nproc_per_node) +
           " + local rank)");
    }
    return std::move(spec_);
  }

 private:
  void Note(std::string note) { spec_.notes.push_back(std::move(note)); }

  Status Topology() {
    if (o_.nnodes) {
      spec_.nnodes = *o_.nnodes;
      from_.nnodes = DescribeFlag(o_, "nnodes", std::to_string(spec_.nnodes));
    } else if (platform_.nnodes && !o_.standalone) {
      spec_.nnodes = *platform_.nnodes;
      from_.nnodes = platform_.nnodes_from;
    }
    if (o_.node_rank) {
      spec_.node_rank = *o_.node_rank;
      from_.node_rank = DescribeFlag(o_, "node-rank", std::to_string(spec_.node_rank));
    } else if (platform_.node_rank && !o_.standalone) {
      spec_.node_rank = *platform_.node_rank;
      from_.node_rank = platform_.node_rank_from;
    }
    if (o_.min_nodes && o_.nnodes) {
      spec_.min_nodes = *o_.min_nodes;
      from_.nnodes = DescribeFlag(
          o_, "nnodes", std::to_string(spec_.min_nodes) + ":" + std::to_string(spec_.nnodes));
    }
    if (o_.standalone && spec_.nnodes > 1) {
      return Error{o_.Source("standalone") + " runs a single node but " + o_.Source("nnodes") +
                       " is " + std::to_string(spec_.nnodes),
                   "drop --standalone, or use --nnodes 1"};
    }
    if (spec_.node_rank >= spec_.nnodes) {
      return Error{(o_.node_rank ? o_.Source("node-rank") + " " + std::to_string(spec_.node_rank)
                                 : from_.node_rank) +
                       ": must be below the number of nodes (" + std::to_string(spec_.nnodes) + ")",
                   "node ranks run from 0 to " + std::to_string(spec_.nnodes - 1) +
                       "; check --node-rank and --nnodes"};
    }
    ElasticStore(o_.node_rank.has_value() || (platform_.node_rank && !o_.standalone));
    spec_.standalone = o_.standalone;
    spec_.max_restarts = o_.max_restarts.value_or(0);
    spec_.restart_backoff = o_.restart_backoff.value_or(RestartBackoff{});
    spec_.role = o_.role.value_or("default");
    if (o_.monitor_interval) {
      Note(o_.Source("monitor-interval") +
           " is accepted for torchrun compatibility and ignored: gculaunch notices a rank's exit "
           "at once");
    }
    if (o_.run_id && o_.rdzv_id && *o_.run_id != *o_.rdzv_id) {
      return Error{o_.Source("run-id") + " '" + *o_.run_id + "' and " + o_.Source("rdzv-id") +
                       " '" + *o_.rdzv_id + "' disagree",
                   "give only one of them"};
    }
    if (o_.run_id || o_.rdzv_id) {
      spec_.run_id = o_.run_id ? *o_.run_id : *o_.rdzv_id;
    } else if (o_.standalone) {
      Note("run id generated at launch (--standalone without --run-id)");
    } else {
      spec_.run_id = "none";  // torchrun's static-rendezvous default
    }
    spec_.rdzv_conf = o_.rdzv_conf;
    return OkStatus();
  }

  // --rdzv-backend: etcd's settings (etcd_settings.h); the etcd keys and an endpoint list
  // belong to etcd alone.
  Status Rendezvous() {
    spec_.rdzv_backend = o_.rdzv_backend.value_or("static");
    if (IsEtcdBackend(spec_.rdzv_backend) && o_.standalone) {
      Note(o_.Source("rdzv-backend") + " " + spec_.rdzv_backend +
           " is ignored with --standalone (as torchrun does): the store is on this node");
      return OkStatus();
    }
    if (IsEtcdBackend(spec_.rdzv_backend)) {
      auto etcd = MakeEtcdSettings(o_, spec_.run_id, files_, env_.GetOr(kEtcdPasswordEnv, ""));
      if (!etcd.ok()) return etcd.error();
      spec_.etcd = std::move(*etcd);
      if (spec_.rdzv_backend == "etcd-v2") {
        Note(
            "--rdzv-backend etcd-v2 is gculaunch's etcd backend: it speaks etcd's v3 API, so "
            "etcd needs no --enable-v2");
      }
      return OkStatus();
    }
    for (const auto& [key, value] : o_.rdzv_conf) {
      if (!IsEtcdConfKey(key)) continue;
      return Error{o_.Source("rdzv-conf") + " '" + key + "' is a key of the etcd backend, not of " +
                       spec_.rdzv_backend,
                   "add --rdzv-backend etcd, or drop " + key};
    }
    if (o_.rdzv_endpoint_list) {
      return Error{o_.Source("rdzv-endpoint") + " '" + *o_.rdzv_endpoint_list +
                       "': a list of endpoints (or a URL) is only for --rdzv-backend etcd",
                   "give one HOST:PORT, e.g. --rdzv-endpoint node0:29400"};
    }
    return OkStatus();
  }

  // Where the store is: MASTER_ADDR and MASTER_PORT, from --standalone, --rdzv-endpoint,
  // --master-addr/--master-port, the platform or the defaults.
  Status Master() {
    if (spec_.etcd) return EtcdMaster();
    const bool addr_given = o_.master_addr.has_value();
    const bool port_given = o_.master_port.has_value();
    if (o_.rdzv_endpoint && (addr_given || port_given) && !o_.standalone) {
      // torchrun never refuses this: the endpoint names the store.
      std::vector<std::string> ignored;
      if (addr_given) ignored.push_back(DescribeFlag(o_, "master-addr", *o_.master_addr));
      if (port_given) {
        ignored.push_back(DescribeFlag(o_, "master-port", std::to_string(*o_.master_port)));
      }
      const Endpoint& endpoint = *o_.rdzv_endpoint;
      const std::string host =
          endpoint.host.find(':') != std::string::npos ? "[" + endpoint.host + "]" : endpoint.host;
      Note(Join(ignored, " and ") + (ignored.size() > 1 ? " are" : " is") + " ignored: " +
           DescribeFlag(o_, "rdzv-endpoint",
                        host + (endpoint.port ? ":" + std::to_string(*endpoint.port) : "")) +
           " names the store (as torchrun does)");
    }
    if (o_.standalone) {
      StandaloneMaster();
      return OkStatus();
    }
    if (o_.rdzv_endpoint) {
      EndpointMaster();
      return OkStatus();
    }
    return FlagsMaster();
  }

  void StandaloneMaster() {
    spec_.master_addr = kDefaultMasterAddr;
    from_.master_addr = o_.Source("standalone");
    if (o_.master_port) from_.master_port = o_.Source("master-port");
    if (o_.master_addr && *o_.master_addr != kDefaultMasterAddr) {
      Note(o_.Source("master-addr") + " is ignored with --standalone: the store is on " +
           kDefaultMasterAddr);
    }
    if (o_.rdzv_endpoint) {
      Note(o_.Source("rdzv-endpoint") + " is ignored with --standalone (as torchrun does)");
    }
    spec_.master_port = o_.master_port.value_or(0);
  }

  void EndpointMaster() {
    spec_.master_addr = o_.rdzv_endpoint->host;
    from_.master_addr = o_.Source("rdzv-endpoint");
    if (o_.rdzv_endpoint->port) {
      from_.master_port = o_.Source("rdzv-endpoint");
      spec_.master_port = *o_.rdzv_endpoint->port;
    } else {
      spec_.master_port = kDefaultEndpointPort;
      Note(o_.Source("rdzv-endpoint") + " has no port: using " +
           std::to_string(kDefaultEndpointPort) + " (torchrun's default)");
    }
  }

  // etcd: --rdzv-endpoint names etcd; each epoch's leader hosts the ranks' store, on
  // MASTER_PORT (from the flags, the platform or the default).
  Status EtcdMaster() {
    const int nnodes = spec_.nnodes;
    spec_.nnodes = 1;  // no "needs the store's address": the leader's is found in etcd
    Status ok = FlagsMaster();
    spec_.nnodes = nnodes;
    spec_.agent_port = spec_.master_port;  // the leader serves the ranks' store on MASTER_PORT
    Note(
        "etcd rendezvous: the ranks' store is on each epoch's leader, found in etcd; "
        "MASTER_ADDR here is a placeholder");
    return ok;
  }

  // --master-addr and --master-port, each else from the platform, else the default.
  Status FlagsMaster() {
    if (o_.master_addr) {
      spec_.master_addr = *o_.master_addr;
      from_.master_addr = o_.Source("master-addr");
    } else if (platform_.master_addr) {
      spec_.master_addr = *platform_.master_addr;
      from_.master_addr = platform_.master_addr_from;
    } else {
      spec_.master_addr = kDefaultMasterAddr;
      if (spec_.nnodes > 1) {
        return Error{
            (o_.nnodes ? o_.Source("nnodes") + " " + std::to_string(spec_.nnodes) : from_.nnodes) +
                " needs the store's address: the default " + kDefaultMasterAddr +
                " is not reachable from other nodes",
            "give --master-addr HOST (node 0's address) on every node"};
      }
    }
    if (o_.master_port) {
      spec_.master_port = *o_.master_port;
      from_.master_port = o_.Source("master-port");
    } else if (platform_.master_port) {
      spec_.master_port = *platform_.master_port;
      from_.master_port = platform_.master_port_from;
    } else {
      spec_.master_port = kDefaultMasterPort;
    }
    return OkStatus();
  }

  // Who hosts the ranks' store and on which port: gculaunch (the agent store) or rank 0
  // (--no-agent-store, --worker-port); several nodes meet on MASTER_PORT.
  Status StorePorts() {
    if (o_.worker_port && !o_.no_agent_store) {
      return Error{o_.Source("worker-port") + " only applies with --no-agent-store",
                   "add --no-agent-store, or drop --worker-port"};
    }
    if (spec_.nnodes > 1) {
      // Node 0's gculaunch always meets the other nodes on this port.
      if (spec_.master_port == 0) {
        return Error{"port 0 (chosen at launch) cannot work across " +
                         std::to_string(spec_.nnodes) + " nodes",
                     "give a fixed port on every node, e.g. --master-port 29500"};
      }
      spec_.agent_port = spec_.master_port;
    }
    if (o_.no_agent_store) {
      spec_.store_mode = StoreMode::kRank0;
      if (o_.worker_port) {
        if (spec_.nnodes > 1 && *o_.worker_port == spec_.agent_port) {
          return Error{o_.Source("worker-port") + " " + std::to_string(*o_.worker_port) +
                           " is MASTER_PORT, where node 0's gculaunch meets the other nodes",
                       "give rank 0's store another port, or drop --worker-port to let node "
                       "0 pick a free one"};
        }
        spec_.worker_port = *o_.worker_port;
        spec_.master_port = *o_.worker_port;
        from_.master_port = o_.Source("worker-port");
      } else if (spec_.nnodes > 1) {
        spec_.master_port = 0;  // node 0 picks a free port per restart and tells every node
        Note(
            "rank 0's store port is chosen at launch by node 0 (--no-agent-store without "
            "--worker-port); MASTER_PORT " +
            std::to_string(spec_.agent_port) + " stays node 0's gculaunch's");
      }
    }
    RendezvousTimeout();
    if (spec_.master_port == 0) {
      Note(spec_.store_mode == StoreMode::kAgent
               ? "master port chosen at launch: gculaunch binds a free port for its store"
               : "master port chosen at launch: a free port for rank 0's store");
    }
    return OkStatus();
  }

  // Elastic: who hosts the store (is_host, else a node rank given: 0), the last call.
  void ElasticStore(bool rank_given) {
    if (!spec_.elastic()) return;
    if (auto it = o_.rdzv_conf.find("is_host"); it != o_.rdzv_conf.end()) {
      spec_.store_host = it->second == "1" || it->second == "true" || it->second == "True";
    } else if (rank_given) {
      spec_.store_host = spec_.node_rank == 0;
    }
    if (spec_.store_host) spec_.node_rank = *spec_.store_host ? 0 : 1;
    if (auto it = o_.rdzv_conf.find("last_call_timeout"); it != o_.rdzv_conf.end()) {
      spec_.last_call_s = std::strtod(it->second.c_str(), nullptr);
    }
  }

  // --rdzv-timeout, else --rdzv-conf join_timeout or timeout, else the default.
  void RendezvousTimeout() {
    if (o_.rdzv_timeout) {
      spec_.rdzv_timeout_s = *o_.rdzv_timeout;
      return;
    }
    for (const char* key : {"join_timeout", "timeout"}) {
      auto it = spec_.rdzv_conf.find(key);
      if (it == spec_.rdzv_conf.end()) continue;
      spec_.rdzv_timeout_s = std::strtod(it->second.c_str(), nullptr);
      break;
    }
  }

  Status Device() {
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
  void NoteProfileFile() {
    if (spec_.profile.source != "built-in" && !spec_.profile.source.empty()) {
      Note("device profile " + spec_.profile.name + " from " + spec_.profile.source);
    }
  }

  bool UsesCards() const {
    return spec_.profile.has_devices() || !spec_.profile.visible_env.empty();
  }

  Status Pool() {
    const DeviceProfile& profile = spec_.profile;
    if (!profile.container_visible_env.empty() && env_.Has(profile.container_visible_env)) {
      const std::string& var = profile.container_visible_env;
      const bool set_by_us = std::find(profile.visible_env.begin(), profile.visible_env.end(),
                                       var) != profile.visible_env.end();
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
  Error NoCards(const std::string& what, bool suggest_number) const {
    return Error{what + ": no " + spec_.profile.name + " cards found (" +
                     DescribeMissingCards(spec_.profile, probe_) + ")",
                 suggest_number
                     ? "give a number such as --nproc-per-node 8 (--dry-run then previews "
                       "without cards), check the driver and the container's device mounts, or "
                       "use --device cpu"
                     : "check the driver and the container's device mounts, or use --device "
                       "cpu (--dry-run previews without cards)"};
  }

  Status Nproc() {
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
      return Error{std::to_string(spec_.nnodes) + " nodes x " +
                       std::to_string(spec_.nproc_per_node) + " ranks is more than " +
                       std::to_string(1LL << 24) + " ranks",
                   "check " + o_.Source("nnodes") + " and " + source};
    }
    spec_.rank_offset = spec_.node_rank * spec_.nproc_per_node;
    spec_.world_size = static_cast<int>(world);
    return OkStatus();
  }

  Status Cards() {
    spec_.bind = o_.bind.value_or(DeviceBind::kAll);
    if (o_.virtual_local_rank) {
      if (o_.bind == DeviceBind::kAll) {
        return Error{o_.Source("virtual-local-rank") + " and " + o_.Source("bind") +
                         " all conflict: a virtual local rank sees only its own card",
                     "drop one of them"};
      }
      spec_.bind = DeviceBind::kRank;
      Note(o_.Source("virtual-local-rank") +
           " is done as --bind rank: each rank sees only its card, as device index 0 "
           "(GCULAUNCH_DEVICE_INDEX); LOCAL_RANK keeps the rank's real local rank");
    }
    const int nproc = spec_.nproc_per_node;
    if (!UsesCards()) {
      if (spec_.bind == DeviceBind::kRank) {
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
      Error error{o_.Source("bind") + " rank: " + std::to_string(nproc) + " ranks need " +
                      std::to_string(nproc) + " cards but the pool has " + std::to_string(cards) +
                      " (" + spec_.pool_source + ")",
                  "use --nproc-per-node " + std::to_string(cards) + " or fewer, or --bind all"};
      if (!spec_.dry_run) return error;
      Note(error.what + "; a real launch stops here");
    } else {
      Note(std::to_string(nproc) + " ranks on " + std::to_string(cards) +
           " cards: ranks share cards round-robin (GCULAUNCH_DEVICE)");
    }
    return OkStatus();
  }

  // The card (device file) each local rank uses, for --cpu-affinity numa.
  std::vector<std::optional<DeviceFile>> RankCards() const {
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
      if (id.empty() || id.size() > 6 || !std::all_of(id.begin(), id.end(), [](unsigned char c) {
            return std::isdigit(c) != 0;
          })) {
        continue;
      }
      const size_t index = std::stoul(id);
      if (index < found.size()) cards[static_cast<size_t>(rank)] = found[index];
    }
    return cards;
  }

  Status Affinity() {
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

  std::string SearchPath() const {
    for (const auto& [key, value] : o_.env) {
      if (key == "PATH") return value;  // the ranks' PATH, as the exec would see it
    }
    return env_.GetOr("PATH", kDefaultPath);
  }

  // Finds `name`; in a dry run a missing program becomes a note.
  // `missing` for a name not found (exit 127), `not_executable` for a path that exists but
  // cannot be run (exit 126), as the shell says.
  Result<std::string> Resolve(const std::string& name, Error missing, Error not_executable) {
    if (auto found = files_.FindExecutable(name, SearchPath())) return *found;
    const bool exists = name.find('/') != std::string::npos && files_.FileExists(name);
    Error error = exists ? std::move(not_executable) : std::move(missing);
    error.exit_code = exists ? exit_code::kNotExecutable : exit_code::kSpawnFailed;
    if (!spec_.dry_run) return error;
    Note(error.what + "; a real launch stops here");
    return name;
  }

  Status Program() {
    if (o_.module && o_.no_python) {
      return Error{o_.Source("module") + " and " + o_.Source("no-python") + " conflict",
                   "drop one: -m runs SCRIPT as a Python module, --no-python runs SCRIPT as a "
                   "program"};
    }
    spec_.local_rank_arg = o_.local_rank_arg;
    std::vector<std::string>& argv = spec_.argv;
    if (o_.no_python) {
      const bool has_slash = o_.script.find('/') != std::string::npos;
      auto exe = Resolve(
          o_.script,
          has_slash ? Error{"SCRIPT '" + o_.script + "' was not found",
                            "check the path (a relative path starts in the current directory)"}
                    : Error{"SCRIPT '" + o_.script + "' was not found on PATH",
                            "give its path, e.g. ./" + o_.script},
          Error{"SCRIPT '" + o_.script + "' is not an executable file",
                "make it executable (chmod +x), or drop --no-python to run it with Python"});
      if (!exe.ok()) return exe.error();
      spec_.executable = *exe;
      argv.push_back(o_.script);
    } else {
      std::string name = "python3";
      std::string source;
      if (o_.python) {
        name = *o_.python;
        source = o_.Source("python");
      } else if (!env_.GetOr("PYTHON_EXEC", "").empty()) {
        name = env_.GetOr("PYTHON_EXEC", "");
        source = "PYTHON_EXEC";
      }
      const std::string fix = source.empty()            ? "install Python 3, or give --python PATH"
                              : source == "PYTHON_EXEC" ? "fix or unset PYTHON_EXEC"
                                                        : "give the path of a Python interpreter";
      const bool has_slash = name.find('/') != std::string::npos;
      Error missing{source.empty() ? "python3 was not found on PATH"
                                   : source + " '" + name +
                                         "': " + (has_slash ? "not found" : "not found on PATH"),
                    fix};
      auto python = Resolve(
          name, missing,
          Error{(source.empty() ? "python3" : source) + " '" + name + "': not an executable file",
                fix});
      if (!python.ok()) return python.error();
      spec_.python = *python;
      spec_.python_origin = source.empty() ? "python3 on PATH" : source;
      spec_.executable = *python;
      Note("interpreter " + *python + " (" + spec_.python_origin + ")");
      argv = {*python, "-u"};
      if (o_.module) argv.push_back("-m");
      argv.push_back(o_.script);
    }
    if (Status ok = PythonShim(); !ok.ok()) return ok;
    if (Status ok = Hangs(); !ok.ok()) return ok;
    StackDumps();
    // torch.distributed.launch put --local_rank right after the script.
    if (o_.local_rank_arg) argv.push_back("--local_rank=${local_rank}");
    // A job file's config for this card count replaces "{config}".
    std::string config_note;
    auto args =
        SelectConfig(o_, spec_.world_size, spec_.nnodes, spec_.nproc_per_node, &config_note);
    if (!args.ok()) return args.error();
    if (!config_note.empty()) Note(config_note);
    argv.insert(argv.end(), args->begin(), args->end());
    return OkStatus();
  }

  // --hang-timeout, --hang-grace, --on-hang (docs/command-line.md, section --hang-timeout).
  Status Hangs() {
    for (const char* flag : {"hang-grace", "on-hang"}) {
      const bool given =
          std::string(flag) == "hang-grace" ? o_.hang_grace.has_value() : o_.on_hang.has_value();
      if (given && !o_.hang_timeout) {
        return Error{o_.Source(flag) + " only applies with --hang-timeout",
                     "add --hang-timeout DURATION, or drop --" + std::string(flag)};
      }
    }
    if (!o_.hang_timeout) return OkStatus();
    if (IsEtcdBackend(o_.rdzv_backend.value_or("")) && !o_.standalone) {
      // The job-wide hang watch runs next to the store host's coordinator; on etcd that is
      // each term's leader, which does not carry it yet (docs/etcd.md, "When etcd itself
      // fails, and what is not there yet").
      return Error{o_.Source("hang-timeout") + " is not available with --rdzv-backend etcd yet",
                   "drop --hang-timeout, or use --rdzv-backend c10d for this job"};
    }
    spec_.hang_timeout_s = *o_.hang_timeout;
    spec_.hang_grace_s = std::max(o_.hang_grace.value_or(600.0), spec_.hang_timeout_s);
    spec_.on_hang = o_.on_hang.value_or(OnHang::kStop);
    static const char* const kActions[] = {"stop the ranks (exit 6)",
                                           "restart the ranks (counts against --max-restarts)",
                                           "report it and keep running"};
    Note("--hang-timeout: " + Seconds(std::chrono::duration<double>(spec_.hang_timeout_s), -1) +
         " without progress from any rank (output, or a touch of GCULAUNCH_HEARTBEAT_FILE) "
         "after the first, or " +
         Seconds(std::chrono::duration<double>(spec_.hang_grace_s), -1) +
         " before it, is a hang: every rank's stacks are shown, then gculaunch will " +
         kActions[static_cast<int>(spec_.on_hang)]);
    if (spec_.nnodes > 1) {
      Note(
          "--hang-timeout on several nodes: node 0 decides for the whole job from every "
          "node's progress reports and gathers every node's stacks; give every node the same "
          "--hang-timeout");
    }
    return OkStatus();
  }

  // --stack-dumps: the hook chained before the shim's and the user's sitecustomize.
  void StackDumps() {
    spec_.stack_dumps = o_.stack_dumps || o_.hang_timeout.has_value();
    if (!spec_.stack_dumps) return;
    spec_.stack_dump_signal = StackDumpSignal();
    Note(
        "--stack-dumps: each rank loads gculaunch's stack-dump hook (first on PYTHONPATH), "
        "which writes every thread's Python stack to GCULAUNCH_STACKS_FILE on signal " +
        std::to_string(spec_.stack_dump_signal) + " (SIGRTMIN+" +
        std::to_string(spec_.stack_dump_signal - SIGRTMIN) +
        "); `gculaunch stacks` asks for it; it acts only in the ranks themselves");
    if (o_.no_python) {
      Note(
          "--stack-dumps with --no-python: only a SCRIPT that execs Python itself can be "
          "dumped; other ranks are reported, never signalled");
    }
  }

  Status PythonShim() {
    if (o_.no_backend_fallback && !o_.python_shim) {
      return Error{o_.Source("no-backend-fallback") + " only applies with --python-shim",
                   "add --python-shim, or drop --no-backend-fallback"};
    }
    spec_.python_shim = o_.python_shim;
    spec_.backend_fallback = !o_.no_backend_fallback;
    if (!o_.python_shim) return OkStatus();
    const DeviceProfile& profile = spec_.profile;
    std::string note =
        "--python-shim: each rank loads gculaunch's sitecustomize (first on "
        "PYTHONPATH), which calls init_process_group('" +
        profile.backend + "')";
    if (profile.backend != "nccl") {
      note += profile.python_module.empty()
                  ? ", makes torch.cuda.set_device/current_device/device_count harmless"
                  : ", sends torch.cuda.set_device/current_device/device_count to " +
                        profile.python_module;
    }
    note += spec_.backend_fallback
                ? " and falls back to gloo if '" + profile.backend +
                      "' is missing; it acts only in the ranks themselves"
                : "; a missing '" + profile.backend + "' stops the rank (--no-backend-fallback)";
    Note(note);
    if (o_.no_python) {
      Note(
          "--python-shim with --no-python: the shim acts only if SCRIPT execs Python itself "
          "(the interpreter's parent must be gculaunch)");
    }
    return OkStatus();
  }

  static std::string OwnedHint(const std::string& var, const DeviceProfile& profile) {
    static const std::set<std::string> kTopology = {
        "LOCAL_RANK",       "RANK",       "GROUP_RANK",       "ROLE_RANK",
        "LOCAL_WORLD_SIZE", "WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE"};
    if (kTopology.count(var) != 0) return "use --nnodes, --node-rank and --nproc-per-node";
    if (var == "MASTER_ADDR" || var == "MASTER_PORT") return "use --master-addr and --master-port";
    if (var == "ROLE_NAME") return "use --role";
    if (var == "TORCHELASTIC_RUN_ID") return "use --run-id";
    if (var == "TORCHELASTIC_MAX_RESTARTS") return "use --max-restarts";
    if (var == "TORCHELASTIC_USE_AGENT_STORE") return "use --no-agent-store for False";
    if (var == "TORCHELASTIC_ERROR_FILE") return "use --log-dir to choose where error files go";
    if (var == "TORCHELASTIC_RESTART_COUNT") return "it counts restarts; use --max-restarts";
    if (var == "GCULAUNCH_CPUS") return "use --cpu-affinity numa or spread";
    if (var.rfind("GCULAUNCH_SHIM_", 0) == 0) {
      return "it belongs to --python-shim (and --no-backend-fallback)";
    }
    if (var.rfind("GCULAUNCH_STACKS_", 0) == 0) return "it belongs to --stack-dumps";
    if (var == "GCULAUNCH_HEARTBEAT_FILE") return "it belongs to --hang-timeout";
    if (!profile.visible_env.empty() &&
        std::find(profile.visible_env.begin(), profile.visible_env.end(), var) !=
            profile.visible_env.end()) {
      const std::string& pool_var = profile.visible_env.front();
      return "choose the card pool in gculaunch's own environment (" + pool_var +
             "=0,1 gculaunch ...), and use --bind rank for one card per rank";
    }
    return "gculaunch derives it from the card pool, --bind and --device";
  }

  Status Environment() {
    const std::vector<std::string> owned = OwnedRankVariables(spec_.profile);
    for (const auto& [key, value] : o_.env) {
      if (std::find(owned.begin(), owned.end(), key) != owned.end()) {
        return Error{o_.Source("env") + " " + key + "=" + value + ": " + key +
                         " is set by gculaunch for each rank",
                     OwnedHint(key, spec_.profile)};
      }
    }
    spec_.extra_env = o_.env;
    bool has_omp = env_.Has("OMP_NUM_THREADS");
    for (const auto& [key, value] : o_.env) has_omp = has_omp || key == "OMP_NUM_THREADS";
    for (const auto& [key, value] : spec_.profile.env)
      has_omp = has_omp || key == "OMP_NUM_THREADS";
    if (!has_omp && spec_.cpu_affinity != CpuAffinity::kNone) {
      Note("OMP_NUM_THREADS = each rank's CPU count (--cpu-affinity " +
           std::string(CpuAffinityName(spec_.cpu_affinity)) +
           "; set OMP_NUM_THREADS to choose another value)");
    } else if (!has_omp && spec_.nproc_per_node > 1) {
      spec_.omp_num_threads_default = "1";
      Note(
          "OMP_NUM_THREADS=1 for every rank (torchrun's default with more than one rank per "
          "node; set OMP_NUM_THREADS to choose another value)");
    }
    spec_.error_file_parent = env_.GetOr("TORCHELASTIC_ERROR_FILE", "");
    // torchrun's watchdog contract: only the exact value 1 turns it on.
    spec_.file_timer = env_.GetOr("TORCHELASTIC_ENABLE_FILE_TIMER", "") == "1";
    if (spec_.file_timer) {
      spec_.file_timer_path = env_.GetOr("TORCHELASTIC_TIMER_FILE", "");
      Note("TORCHELASTIC_ENABLE_FILE_TIMER=1: gculaunch serves torch's file-timer watchdog on " +
           (spec_.file_timer_path.empty() ? std::string("<run directory>/watchdog_timer")
                                          : spec_.file_timer_path) +
           " (TORCHELASTIC_TIMER_FILE of every rank): a rank's expired timer sends its signal "
           "to that process, as torchrun does");
    }
    return OkStatus();
  }

  Status CheckStreams(const std::string& name, const std::optional<StdStreams>& streams) {
    if (!streams) return OkStatus();
    for (const auto& [rank, bits] : streams->per_rank) {
      if (rank >= spec_.nproc_per_node) {
        return Error{o_.Source(name) + ": local rank " + std::to_string(rank) +
                         " does not exist (nproc-per-node is " +
                         std::to_string(spec_.nproc_per_node) + ")",
                     "use local ranks 0 to " + std::to_string(spec_.nproc_per_node - 1)};
      }
    }
    return OkStatus();
  }

  Status Output() {
    spec_.grace_period_s = o_.grace_period.value_or(25.0);
    spec_.log_dir = o_.log_dir.value_or("");
    spec_.allow_shared_log_dir = o_.allow_shared_log_dir;
    while (spec_.log_dir.size() > 1 && spec_.log_dir.back() == '/') spec_.log_dir.pop_back();
    if (Status ok = CheckStreams("redirects", o_.redirects); !ok.ok()) return ok;
    if (Status ok = CheckStreams("tee", o_.tee); !ok.ok()) return ok;
    spec_.redirects = o_.redirects.value_or(StdStreams{});
    spec_.tee = o_.tee.value_or(StdStreams{});
    if (o_.local_ranks_filter) {
      for (int rank : *o_.local_ranks_filter) {
        if (rank >= spec_.nproc_per_node) {
          return Error{o_.Source("local-ranks-filter") + " " + std::to_string(rank) +
                           ": there are only " + std::to_string(spec_.nproc_per_node) +
                           " local ranks",
                       "use local ranks 0 to " + std::to_string(spec_.nproc_per_node - 1)};
        }
      }
      spec_.console_local_ranks = *o_.local_ranks_filter;
    }
    spec_.stdin_mode = o_.stdin_mode.value_or(StdinMode::kNull);
    spec_.summary_json = o_.summary_json.value_or("");
    if (o_.format && !o_.dry_run) {
      return Error{o_.Source("format") + " only applies to --dry-run",
                   "add --dry-run, or drop --format"};
    }
    spec_.dry_run_format = o_.format.value_or(DryRunFormat::kTable);
    return OkStatus();
  }

  // --metrics-port and --metrics-addr (docs/operations.md).  The address is checked when it
  // is bound: the spec does not resolve names.
  Status Metrics() {
    spec_.store_max_queued = o_.store_max_queued;  // the store's bounds: any positive size
    spec_.store_max_buffered = o_.store_max_buffered;
    spec_.metrics_port = o_.metrics_port;
    if (!o_.metrics_addr) return OkStatus();
    if (!o_.metrics_port) {
      return Error{o_.Source("metrics-addr") + " only applies with --metrics-port",
                   "add --metrics-port PORT, or drop --metrics-addr"};
    }
    if (o_.metrics_addr->empty() || o_.metrics_addr->find_first_of(" \t/") != std::string::npos) {
      return Error{o_.Source("metrics-addr") + " '" + *o_.metrics_addr + "' is not an address",
                   "give a numeric address such as 127.0.0.1, 0.0.0.0 or ::"};
    }
    spec_.metrics_addr = *o_.metrics_addr;
    return OkStatus();
  }

  // --job-secret-file (or GCULAUNCH_JOB_SECRET_FILE) and --store-allow (docs/security.md).
  // The secret is read here, so that a missing or empty file stops the launch (and the dry
  // run) with one line; it never appears in a message.  A file others may read is accepted:
  // a Kubernetes Secret volume is 0644 unless its defaultMode says otherwise (the docs ask
  // for 0400/0600).
  Status StoreAccess() {
    if (o_.store_allow) {
      auto networks = ParseNetworkList(*o_.store_allow);
      if (!networks.ok()) {
        return Error{o_.Source("store-allow") + " " + networks.error().what, networks.error().hint};
      }
      spec_.store_allow = std::move(*networks);
    }
    std::string source = o_.Source("job-secret-file");
    std::string path = o_.job_secret_file.value_or("");
    if (path.empty()) {
      path = env_.GetOr(kJobSecretFileEnv, "");
      source = kJobSecretFileEnv;
    }
    if (path.empty()) return OkStatus();
    if (spec_.etcd) {
      Note(source +
           ": not used with --rdzv-backend etcd: the job's keys live in etcd, whose "
           "own authentication (user and password, TLS) protects them (docs/etcd.md)");
      return OkStatus();
    }
    auto text = files_.ReadTextFile(path);
    if (!text.ok()) {
      return Error{source + " " + path + ": " + text.error().what,
                   text.error().hint.empty() ? "name a readable file holding the job's secret"
                                             : text.error().hint};
    }
    std::string secret = std::move(*text);
    while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
    if (secret.empty()) {
      return Error{source + " " + path + " is empty",
                   "put the job's secret in it, the same on every node, e.g. head -c 32 "
                   "/dev/urandom | base64 > FILE"};
    }
    spec_.job_secret_file = path;
    spec_.job_secret = std::move(secret);
    return OkStatus();
  }

  // gculaunch's own extras (the faulthandler, the progress interval) and the torchrun flags
  // that have no effect here: each of those gets one note saying what gculaunch does.
  Status Extras() {
    spec_.python_faulthandler = !o_.no_python_faulthandler;
    spec_.progress_interval_s = o_.progress_interval.value_or(30.0);
    spec_.local_addr = o_.local_addr.value_or("");
    if (o_.local_addr && spec_.nnodes == 1) {
      Note(DescribeFlag(o_, "local-addr", *o_.local_addr) +
           " has no effect on a single node (it is the address this node publishes to the "
           "others)");
    }
    if (o_.start_method) {
      Note(DescribeFlag(o_, "start-method", *o_.start_method) +
           " is accepted for torchrun compatibility and ignored: every rank is a new process "
           "(fork and exec of the interpreter), whatever the start method");
    }
    if (o_.run_path) {
      Note(o_.Source("run-path") +
           " is accepted for torchrun compatibility: torchrun would run SCRIPT inside its own "
           "interpreter; gculaunch starts " +
           (spec_.python.empty() ? std::string("SCRIPT itself (--no-python)")
                                 : spec_.python + " -u SCRIPT") +
           " in each rank, so --python, PYTHON_EXEC, -m and --no-python keep their meaning");
    }
    if (o_.signals_to_handle) SignalsToHandle(*o_.signals_to_handle);
    if (o_.event_log_handler) {
      Note(DescribeFlag(o_, "event-log-handler", *o_.event_log_handler) +
           " is accepted for torchrun compatibility and ignored: gculaunch reports events on "
           "stderr and in --summary-json");
    }
    return OkStatus();
  }

  // --signals-to-handle: torchrun's agent stops its workers on each listed signal.  gculaunch
  // always stops the ranks on SIGINT, SIGTERM, SIGHUP and SIGQUIT (an unlisted one would kill
  // torchrun and orphan its workers; gculaunch never leaves ranks behind), forwards SIGUSR1/2
  // unless listed, and keeps its own handling of the signals it needs (SIGCHLD, ...).
  void SignalsToHandle(const std::vector<std::string>& names) {
    static const std::pair<const char*, int> kStoppable[] = {
        {"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2}, {"SIGALRM", SIGALRM}};
    static const std::set<std::string> kAlways = {"SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"};
    std::vector<std::string> stop;
    std::vector<std::string> kept;
    std::vector<std::string> missing(kAlways.begin(), kAlways.end());
    for (const std::string& name : names) {
      missing.erase(std::remove(missing.begin(), missing.end(), name), missing.end());
      if (kAlways.count(name) != 0) continue;
      auto it = std::find_if(std::begin(kStoppable), std::end(kStoppable),
                             [&](const auto& entry) { return name == entry.first; });
      if (it == std::end(kStoppable)) {
        kept.push_back(name);
      } else if (std::find(spec_.extra_stop_signals.begin(), spec_.extra_stop_signals.end(),
                           it->second) == spec_.extra_stop_signals.end()) {
        spec_.extra_stop_signals.push_back(it->second);
        stop.push_back(name);
      }
    }
    const std::string flag = DescribeFlag(o_, "signals-to-handle", Join(names, ","));
    if (!stop.empty()) Note(flag + ": " + Join(stop, ", ") + " also stop the ranks");
    if (!missing.empty()) {
      Note(flag + ": gculaunch still stops the ranks on " + Join(missing, ", ") +
           " (torchrun would die of it and leave its workers running)");
    }
    if (!kept.empty()) {
      Note(flag + ": " + Join(kept, ", ") +
           " keep gculaunch's own handling (they do not stop the ranks)");
    }
  }

  const CliOptions& o_;
  const EnvMap& env_;
  const DeviceProbe& probe_;
  const FileAccess& files_;
  const PlatformInfo& platform_;
  LaunchSpec spec_;
  LayoutSources from_;  ///< where the layout line says each value came from
};

}  // namespace

namespace {

// --job: the file's settings merged below the command line and PET_*
// (job_file.h), before anything else looks at the options (the platform
// layer included: a job file's values count as given).
struct MergedOptions {
  CliOptions options;
  std::vector<std::string> notes;
};

Result<MergedOptions> MergeJobFile(const CliOptions& options, const FileAccess& files) {
  MergedOptions merged{options, {}};
  if (!options.job) return merged;
  auto text = files.ReadTextFile(*options.job);
  if (!text.ok()) {
    return OneLine(Error{
        options.Source("job") + ": " + text.error().what,
        text.error().hint.empty() ? "give the path of an existing job file" : text.error().hint});
  }
  auto job = ParseJobFile(*text, *options.job);
  if (!job.ok()) return job.error();
  auto notes = ApplyJobFile(*job, merged.options);
  if (!notes.ok()) return notes.error();
  merged.notes = std::move(*notes);
  if (merged.options.script.empty()) {
    return OneLine(
        Error{"no SCRIPT given: neither the command line nor " + *options.job + " names one",
              "add script: to the job file, or give SCRIPT after the flags"});
  }
  return merged;
}

Result<LaunchSpec> BuildSpec(const MergedOptions& merged, const EnvMap& env,
                             const DeviceProbe& probe, const FileAccess& files,
                             const PlatformInfo& platform) {
  auto spec = SpecBuilder(merged.options, env, probe, files, platform).Build();
  if (!spec.ok()) return OneLine(spec.error());
  spec->notes.insert(spec->notes.begin(), merged.notes.begin(), merged.notes.end());
  for (std::string& note : spec->notes) note = OneLine(note);
  for (std::string& warning : spec->warnings) warning = OneLine(warning);
  spec->layout = OneLine(spec->layout);
  return spec;
}

}  // namespace

Result<LaunchSpec> MakeLaunchSpec(const CliOptions& options, const EnvMap& env,
                                  const DeviceProbe& probe, const FileAccess& files) {
  auto merged = MergeJobFile(options, files);
  if (!merged.ok()) return merged.error();
  auto platform = ReadPlatform(env, merged->options);
  if (!platform.ok()) return OneLine(platform.error());
  return BuildSpec(*merged, env, probe, files, *platform);
}

Result<LaunchSpec> MakeLaunchSpec(const CliOptions& options, const EnvMap& env,
                                  const DeviceProbe& probe, const FileAccess& files,
                                  const PlatformInfo& platform) {
  auto merged = MergeJobFile(options, files);
  if (!merged.ok()) return merged.error();
  return BuildSpec(*merged, env, probe, files, platform);
}

std::string RunLogRoot(const LaunchSpec& spec, const std::string& run_id) {
  if (!spec.log_dir.empty()) return spec.log_dir + "/" + run_id + "_<random>";
  if (!WantsLogFiles(spec)) return "";
  return "<TMPDIR>/torchelastic_<random>/" + run_id + "_<random>";
}

bool WantsLogFiles(const LaunchSpec& spec) {
  return !spec.log_dir.empty() || spec.redirects.any() || spec.tee.any();
}

}  // namespace gculaunch
