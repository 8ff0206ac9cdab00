#include "launcher/cluster/cluster_node.h"

#include <unistd.h>

#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <random>
#include <sstream>
#include <utility>

#include "base/duration.h"
#include "base/exit_codes.h"
#include "launcher/cluster/etcd/etcd_cluster_node.h"
#include "launcher/cluster/etcd/etcd_options.h"
#include "launcher/cluster/job_protocol.h"
#include "launcher/cluster/net_address.h"
#include "launcher/cluster/store_cluster_node.h"
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
  // 0: node ranks given (job_protocol.h); MIN = MAX (on etcd, or c10d without node ranks): a
  // fixed size on the elastic path.
  reg.min_nodes = spec.node_rank_at_rendezvous() ? spec.min_nodes : spec.etcd ? spec.nnodes : 0;
  reg.nproc = spec.nproc_per_node;
  reg.max_restarts = spec.max_restarts;
  reg.hang = HangSetting(spec);
  reg.run_id = runtime.run_id;
  reg.host = sys::HostName();
  reg.pid = static_cast<int>(::getpid());
  reg.addr = spec.local_addr;  // --local-addr; empty: the address that routes to the master
  reg.incarnation = NewIncarnation();
  return reg;
}

NodeAgentSettings MakeAgentSettings(const LaunchSpec& spec, const job::NodeRegistration& reg) {
  NodeAgentSettings a;
  a.config.node_rank = spec.node_rank;
  a.config.max_restarts = spec.max_restarts;
  // On etcd "node 0" is the leader of the current term, wherever it runs.
  a.config.node0_name = spec.etcd ? "the job's leader in etcd" : spec.master_addr;
  a.config.rdzv_timeout_s = static_cast<int>(spec.rdzv_timeout_s);
  a.config.nnodes = spec.nnodes;
  a.config.min_nodes = reg.min_nodes;
  a.config.elected_leader = spec.etcd.has_value();
  a.rdzv_timeout = SecondsToMillis(spec.rdzv_timeout_s);
  a.registration = reg;
  a.is_node0 = spec.node_rank == 0 && !spec.etcd;
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
  c.config.node0 = reg;
  c.config.elected_leader = spec.etcd.has_value();
  if (spec.node_rank_at_rendezvous()) c.config.host_why = spec.store_host_why;
  c.config.rdzv_timeout_s = static_cast<int>(spec.rdzv_timeout_s);
  c.rdzv_timeout = SecondsToMillis(spec.rdzv_timeout_s);
  c.ranks_port = spec.store_mode == StoreMode::kAgent ? 0
                 : spec.worker_port != 0              ? spec.worker_port
                                                      : -1;
  return c;
}

// --rdzv-backend etcd: every node campaigns; the term's leader serves the ranks' store on
// MASTER_PORT and runs the coordinator (docs/etcd.md, "Job rendezvous on etcd").
Result<std::unique_ptr<ClusterNode>> MakeEtcdClusterNode(const LaunchSpec& spec,
                                                         const ClusterNodeSettings& settings,
                                                         const ClusterNodeContext& context) {
  auto options = MakeEtcdClientOptions(*spec.etcd);
  if (!options.ok()) return options.error();
  EtcdClusterNodeSettings s;
  s.seat.coordinator = settings.coordinator;
  s.seat.ranks_host = "";  // every interface, IPv4 and IPv6
  s.seat.ranks_port = static_cast<std::uint16_t>(spec.agent_port);
  s.agent = settings.agent;
  const job::NodeRegistration& reg = settings.agent.registration;
  s.identity = EtcdIdentity{reg.host, reg.pid, reg.incarnation};
  s.key_prefix = spec.etcd->key_prefix;
  s.lease_ttl = std::chrono::seconds(spec.etcd->lease_ttl_s);
  s.local_addr = spec.local_addr;
  s.rdzv_timeout = settings.agent.rdzv_timeout;
  auto node = EtcdClusterNode::Make(context.io, std::move(*options), std::move(s), context.planner,
                                    context.log);
  if (!node.ok()) return node.error();
  return std::unique_ptr<ClusterNode>(std::move(*node));
}

}  // namespace

bool RunsAsCluster(const LaunchSpec& spec) { return spec.nnodes > 1 || spec.etcd.has_value(); }

std::optional<LaunchSpec> DecideStoreHost(const LaunchSpec& spec) {
  if (!spec.node_rank_at_rendezvous() || spec.store_host || spec.etcd) return std::nullopt;
  LaunchSpec decided = spec;
  const HostMatch match = MatchThisHost(spec.master_addr);
  decided.store_host = match.local;
  decided.store_host_why = match.why;
  decided.store_host_inferred = true;
  decided.node_rank = match.local ? 0 : 1;
  decided.layout = FormatLayout(decided);
  return decided;
}

LaunchSpec JoinAsClient(const LaunchSpec& spec, const std::string& why) {
  LaunchSpec client = spec;
  client.store_host = false;
  client.store_host_why = why;
  client.node_rank = 1;
  client.layout = FormatLayout(client);
  return client;
}

ClusterNodeSettings MakeClusterNodeSettings(const LaunchSpec& spec, const RankRuntime& runtime) {
  ClusterNodeSettings m;
  const job::NodeRegistration reg = MakeRegistration(spec, runtime);
  m.agent = MakeAgentSettings(spec, reg);
  m.coordinator = MakeCoordinatorSettings(spec, reg);
  m.remote.host = spec.master_addr;
  m.remote.port = spec.agent_port;
  m.remote.connect_timeout = SecondsToMillis(spec.rdzv_timeout_s);
  if (spec.node_rank_at_rendezvous()) m.remote.not_host_why = spec.store_host_why;
  m.remote.secret = spec.job_secret;
  return m;
}

Result<std::unique_ptr<ClusterNode>> MakeClusterNode(const LaunchSpec& spec,
                                                     const RankRuntime& runtime,
                                                     const ClusterNodeContext& context) {
  ClusterNodeSettings settings = MakeClusterNodeSettings(spec, runtime);
  settings.agent.events = context.events;
  settings.coordinator.events = context.events;
  if (spec.etcd) return MakeEtcdClusterNode(spec, settings, context);
  return std::unique_ptr<ClusterNode>(std::make_unique<StoreClusterNode>(spec, settings, context));
}

void ClusterNode::WaitUntil(boost::asio::io_context& io,
                            std::chrono::steady_clock::time_point bound,
                            const std::function<bool()>& finished) {
  bool interrupted = false;
  boost::asio::signal_set interrupt(io, SIGINT, SIGTERM, SIGQUIT);
  interrupt.async_wait([&](const boost::system::error_code& ec, int) {
    if (!ec) interrupted = true;
  });
  while (!interrupted && !finished()) {
    if (io.run_one_until(bound) == 0) break;
  }
  interrupt.cancel();
}

void DescribeJobEnd(const NodeAgent& agent, SummaryInput& in) {
  if (agent.join_error()) {
    in.job_outcome =
        in.exit_code == exit_code::kRendezvousFailed ? "rendezvous_failed" : "job_error";
    in.job_json = {{"kind", in.job_outcome}, {"what", agent.join_error()->Format()}};
    return;
  }
  if (!agent.outcome()) return;
  const job::StopMarker& m = *agent.outcome();
  in.job_outcome =
      m.kind == job::StopMarker::Kind::kJobError && m.exit_code == exit_code::kRendezvousFailed
          ? "rendezvous_failed"
          : job::KindName(m.kind);
  in.job_json = nlohmann::json::parse(job::Encode(m), nullptr, false);
  if (m.kind != job::StopMarker::Kind::kSuccess)
    in.job_cause = "the job stopped: " + job::Describe(m);
}

}  // namespace gculaunch
