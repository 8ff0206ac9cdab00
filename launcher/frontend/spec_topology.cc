// MakeLaunchSpec's first steps (spec_builder.h): how many nodes, this node's rank, the
// rendezvous, the master and the ports of the ranks' store; and the layout line.
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
#include "launcher/frontend/cli_apply.h"
#include "launcher/frontend/job_file.h"
#include "launcher/frontend/platform.h"
#include "launcher/frontend/profile_catalog.h"
#include "launcher/frontend/rank_env.h"
#include "launcher/frontend/spec_builder.h"
#include "launcher/frontend/stack_hook.h"

namespace gculaunch {
namespace {

constexpr int kDefaultMasterPort = 29500;    // torchrun's --master_port default
constexpr int kDefaultEndpointPort = 29400;  // torchrun's c10d endpoint default
constexpr const char* kDefaultMasterAddr = "127.0.0.1";

}  // namespace

std::string FormatLayoutSources(const LayoutSources& from) {
  std::vector<std::string> sources;
  for (const std::string* source :
       {&from.nnodes, &from.node_rank, &from.master_addr, &from.master_port}) {
    if (!source->empty() && std::find(sources.begin(), sources.end(), *source) == sources.end()) {
      sources.push_back(*source);
    }
  }
  return sources.empty() ? "(defaults)" : "(from " + Join(sources, ", ") + ")";
}

namespace {

// Node rank at rendezvous, without etcd: who hosts the store, and why when known.
std::string StoreHostText(const LaunchSpec& spec) {
  if (!spec.store_host) return "the node the endpoint names hosts the store";
  const std::string why = spec.store_host_why.empty() ? "" : " (" + spec.store_host_why + ")";
  return (*spec.store_host ? "this node hosts the store" : "another node hosts the store") + why;
}

}  // namespace

std::string FormatLayout(const LaunchSpec& spec) {
  const std::string host = spec.master_addr.find(':') != std::string::npos
                               ? "[" + spec.master_addr + "]"
                               : spec.master_addr;
  // Multi-node: the port node 0's gculaunch meets the other nodes on (which the ranks'
  // MASTER_PORT differs from only with --no-agent-store).
  const int shown = spec.agent_port != 0 ? spec.agent_port : spec.master_port;
  const std::string port = shown != 0 ? std::to_string(shown) : "<port chosen at launch>";
  const std::string count = spec.elastic() ? std::to_string(spec.min_nodes) + " to " +
                                                 std::to_string(spec.nnodes) + " nodes (elastic)"
                                           : Plural(spec.nnodes, "node");
  std::string line = "layout: " + Plural(spec.nnodes, "node") + " x " +
                     Plural(spec.nproc_per_node, "rank") + ", node " +
                     std::to_string(spec.node_rank) + ", master " + host + ":" + port;
  if (const auto* etcd = std::get_if<EtcdSettings>(&spec.rdzv)) {
    // Every node is alike: the leader of each term hosts the ranks' store (docs/etcd.md).
    line = "layout: " + count + " x " + Plural(spec.nproc_per_node, "rank") +
           ", rendezvous in etcd at " + Join(etcd->endpoints, ",") + " under " + etcd->key_prefix +
           ", node rank assigned at rendezvous, the leader of each term " +
           "hosts the ranks' store on port " + port;
  } else if (spec.node_rank_at_rendezvous()) {
    // Node ranks come from the rendezvous: each epoch's layout line names them.
    line = "layout: " + count + " x " + Plural(spec.nproc_per_node, "rank") +
           ", node rank assigned at rendezvous, " + StoreHostText(spec) + ", master " + host + ":" +
           port;
  }
  return line + " " + spec.layout_sources;
}

// Everything MakeLaunchSpec decides, step by step; each step may fail with
// an Error naming the flag or variable.

Status SpecBuilder::Topology() {
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
  const bool rank_given = o_.node_rank.has_value() || (platform_.node_rank && !o_.standalone);
  if (o_.rdzv_backend.value_or("") == "c10d" && !o_.standalone && spec_.nnodes > 1) {
    RankAtRendezvous(rank_given);
  }
  ElasticStore(rank_given);
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
    return Error{o_.Source("run-id") + " '" + *o_.run_id + "' and " + o_.Source("rdzv-id") + " '" +
                     *o_.rdzv_id + "' disagree",
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
  if (std::string unknown = cli_flags::UnknownRdzvConfKeys(o_); !unknown.empty()) {
    spec_.warnings.push_back(std::move(unknown));
  }
  return OkStatus();
}

// --rdzv-backend: etcd's settings (etcd_settings.h); the etcd keys and an endpoint list
// belong to etcd alone.
Status SpecBuilder::Rendezvous() {
  spec_.rdzv_backend = o_.rdzv_backend.value_or("static");
  if (IsEtcdBackend(spec_.rdzv_backend) && o_.standalone) {
    Note(o_.Source("rdzv-backend") + " " + spec_.rdzv_backend +
         " is ignored with --standalone (as torchrun does): the store is on this node");
    return OkStatus();
  }
  if (IsEtcdBackend(spec_.rdzv_backend)) {
    auto etcd = MakeEtcdSettings(o_, spec_.run_id, files_, env_.GetOr(kEtcdPasswordEnv, ""));
    if (!etcd.ok()) return etcd.error();
    spec_.rdzv = std::move(*etcd);
    if (spec_.rdzv_backend == "etcd-v2") {
      Note(
          "--rdzv-backend etcd-v2 is gculaunch's etcd backend: it speaks etcd's v3 API, so "
          "etcd needs no --enable-v2");
    }
    return BackendCan();
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
  return BackendCan();
}

// What the chosen backend cannot do (its row of rdzv_backend.h) and the topology asks for.
Status SpecBuilder::BackendCan() const {
  const RdzvCapabilities& can = CapabilitiesOf(spec_.rdzv);
  if (spec_.elastic() && !can.elastic) {
    return Error{
        from_.nnodes + ": --rdzv-backend " + std::string(can.name) + " cannot grow or shrink a job",
        "give a fixed --nnodes N, or use --rdzv-backend c10d for an elastic job"};
  }
  return OkStatus();
}

// Where the store is: MASTER_ADDR and MASTER_PORT, from --standalone, --rdzv-endpoint,
// --master-addr/--master-port, the platform or the defaults.
Status SpecBuilder::Master() {
  if (CapabilitiesOf(spec_.rdzv).elected_leader) return ElectedMaster();
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

void SpecBuilder::StandaloneMaster() {
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

void SpecBuilder::EndpointMaster() {
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

// A backend with an elected leader (etcd): --rdzv-endpoint names the backend; each epoch's
// leader hosts the ranks' store, on MASTER_PORT (from the flags, the platform or the default).
Status SpecBuilder::ElectedMaster() {
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
Status SpecBuilder::FlagsMaster() {
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
Status SpecBuilder::StorePorts() {
  if (o_.worker_port && !o_.no_agent_store) {
    return Error{o_.Source("worker-port") + " only applies with --no-agent-store",
                 "add --no-agent-store, or drop --worker-port"};
  }
  if (spec_.nnodes > 1) {
    // Node 0's gculaunch always meets the other nodes on this port.
    if (spec_.master_port == 0) {
      return Error{
          "port 0 (chosen at launch) cannot work across " + std::to_string(spec_.nnodes) + " nodes",
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

// --rdzv-backend c10d with a fixed --nnodes: without a node rank (accelerate's and many
// Kubernetes recipes' torchrun line) the rendezvous assigns them, MIN = MAX = nnodes; a
// given one is kept (torchrun ignores it with c10d).
void SpecBuilder::RankAtRendezvous(bool rank_given) {
  if (spec_.elastic()) return;
  if (!rank_given) {
    spec_.min_nodes = spec_.nnodes;
    return;
  }
  Note(from_.node_rank + " is kept with --rdzv-backend c10d: this node is node rank " +
       std::to_string(spec_.node_rank) +
       " (torchrun ignores a node rank with c10d and assigns them at rendezvous; leave it out "
       "for that)");
}

// Node rank at rendezvous: who hosts the store (is_host, else a node rank given: 0), the
// last call.
void SpecBuilder::ElasticStore(bool rank_given) {
  if (!spec_.node_rank_at_rendezvous()) return;
  if (auto it = o_.rdzv_conf.find("is_host"); it != o_.rdzv_conf.end()) {
    // Checked by the command line (cli_apply.cc): torchrun's boolean spellings.
    spec_.store_host = cli_flags::ParseRdzvBool(it->second).value_or(false);
    spec_.store_host_why = "--rdzv-conf is_host=" + it->second;
  } else if (rank_given) {
    spec_.store_host = spec_.node_rank == 0;
    spec_.store_host_why = from_.node_rank;
  }
  if (spec_.store_host) spec_.node_rank = *spec_.store_host ? 0 : 1;
  if (auto it = o_.rdzv_conf.find("last_call_timeout"); it != o_.rdzv_conf.end()) {
    spec_.last_call_s = std::strtod(it->second.c_str(), nullptr);
  }
}

// --rdzv-timeout, else --rdzv-conf join_timeout or timeout, else the default; --node-timeout.
void SpecBuilder::RendezvousTimeout() {
  if (o_.node_timeout) spec_.node_timeout_s = *o_.node_timeout;
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

}  // namespace gculaunch
