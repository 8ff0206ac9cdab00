#include "launcher/cluster/cluster_settings.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <sstream>

#include "base/duration.h"
#include "launcher/cluster/job_protocol.h"
#include "launcher/cluster/liveness.h"
#include "launcher/frontend/rdzv_backend.h"
#include "launcher/ops/hang_check.h"
#include "launcher/run/restart_backoff.h"
#include "launcher/sys/process_setup.h"

namespace gculaunch {

namespace {

// A fresh id per gculaunch start: the job tells a restarted node from its old self by it.
std::string NewIncarnation() {
  std::random_device random;
  const std::uint64_t id = (static_cast<std::uint64_t>(random()) << 32) ^ random() ^
                           static_cast<std::uint64_t>(::getpid());
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(id));
  return text;
}

// --hang-timeout and --on-hang as a node's registration states them: they must agree.
std::string HangSetting(const LaunchSpec& spec) {
  if (spec.hang_timeout_s <= 0) return "no --hang-timeout";
  std::ostringstream out;
  out << "--hang-timeout " << spec.hang_timeout_s << " s, --on-hang " << OnHangName(spec.on_hang);
  return out.str();
}

job::NodeRegistration MakeRegistration(const LaunchSpec& spec, const RankRuntime& runtime) {
  job::NodeRegistration reg;
  reg.node_rank = spec.node_rank;
  reg.nnodes = spec.nnodes;
  // 0: node ranks given (job_protocol.h); MIN = MAX (an elected leader, or c10d without node
  // ranks): a fixed size on the elastic path.
  reg.min_nodes = spec.node_rank_at_rendezvous()             ? spec.min_nodes
                  : CapabilitiesOf(spec.rdzv).elected_leader ? spec.nnodes
                                                             : 0;
  reg.nproc = spec.nproc_per_node;
  reg.max_restarts = spec.max_restarts;
  reg.hang = HangSetting(spec);
  reg.run_id = runtime.run_id;
  reg.host = sys::HostName();
  reg.pid = static_cast<int>(::getpid());
  reg.addr = spec.local_addr;  // --local-addr; empty: the address that routes to the master
  reg.incarnation = NewIncarnation();
  reg.node_plans = true;
  return reg;
}

NodeAgentSettings MakeAgentSettings(const LaunchSpec& spec, const job::NodeRegistration& reg) {
  const RdzvCapabilities& can = CapabilitiesOf(spec.rdzv);
  NodeAgentSettings a;
  a.config.node_rank = spec.node_rank;
  a.config.max_restarts = spec.max_restarts;
  // With an elected leader "node 0" is the leader of the current term, wherever it runs.
  a.config.node0_name = can.elected_leader ? std::string(can.leader_name) : spec.master_addr;
  a.config.rdzv_timeout_s = static_cast<int>(spec.rdzv_timeout_s);
  a.config.nnodes = spec.nnodes;
  a.config.min_nodes = reg.min_nodes;
  a.config.elected_leader = can.elected_leader;
  a.rdzv_timeout = SecondsToMillis(spec.rdzv_timeout_s);
  a.registration = reg;
  a.is_node0 = spec.node_rank == 0 && !can.elected_leader;
  a.master_addr = spec.master_addr;
  a.agent_port = spec.agent_port;
  a.ranks_port =
      std::to_string(spec.store_mode == StoreMode::kAgent ? spec.agent_port : spec.worker_port);
  return a;
}

CoordinatorSettings MakeCoordinatorSettings(const LaunchSpec& spec,
                                            const job::NodeRegistration& reg) {
  CoordinatorSettings c;
  c.config.nnodes = spec.nnodes;
  c.config.min_nodes = reg.min_nodes;
  c.config.last_call_s = static_cast<int>(spec.last_call_s);
  c.last_call = SecondsToMillis(spec.last_call_s);
  c.config.max_restarts = spec.max_restarts;
  c.config.backoff = MakeBackoff(spec.restart_backoff.initial_s, spec.restart_backoff.max_s);
  c.config.streak = StreakConfig{spec.max_same_failures, spec.progress_file};
  c.config.node0 = reg;
  c.config.elected_leader = CapabilitiesOf(spec.rdzv).elected_leader;
  if (spec.node_rank_at_rendezvous()) c.config.host_why = spec.store_host_why;
  c.config.rdzv_timeout_s = static_cast<int>(spec.rdzv_timeout_s);
  c.rdzv_timeout = SecondsToMillis(spec.rdzv_timeout_s);
  c.silence = job::SilenceRule::ForNodeTimeout(SecondsToMillis(spec.node_timeout_s));
  c.ranks_port = spec.store_mode == StoreMode::kAgent ? 0
                 : spec.worker_port != 0              ? spec.worker_port
                                                      : -1;
  return c;
}

}  // namespace

ClusterNodeSettings MakeClusterNodeSettings(const LaunchSpec& spec, const RankRuntime& runtime) {
  ClusterNodeSettings m;
  const job::NodeRegistration reg = MakeRegistration(spec, runtime);
  m.agent = MakeAgentSettings(spec, reg);
  m.coordinator = MakeCoordinatorSettings(spec, reg);
  m.remote.host = spec.master_addr;
  m.remote.port = spec.agent_port;
  m.remote.connect_timeout = SecondsToMillis(spec.rdzv_timeout_s);
  m.remote.node_timeout = SecondsToMillis(spec.node_timeout_s);
  m.remote.heartbeat_interval = job::HeartbeatInterval(spec.nnodes, m.remote.node_timeout);
  if (spec.node_rank_at_rendezvous()) m.remote.not_host_why = spec.store_host_why;
  m.remote.secret = spec.job_secret;
  m.remote.check_listener_owner = spec.store_listener_here;
  return m;
}

}  // namespace gculaunch
