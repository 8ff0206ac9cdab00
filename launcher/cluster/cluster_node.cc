#include "launcher/cluster/cluster_node.h"

#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <utility>

#include "base/exit_codes.h"
#include "launcher/cluster/cluster_settings.h"
#include "launcher/cluster/job_protocol.h"
#include "launcher/cluster/node_agent.h"
#include "launcher/cluster/rdzv_backends.h"
#include "launcher/cluster/single_node.h"
#include "launcher/cluster/store_board.h"
#include "launcher/run/agent_store.h"
#include "launcher/run/exit_summary.h"

namespace gculaunch {

std::shared_ptr<ConnectionHooks> MakeConnectionHooks(const LaunchSpec& spec) {
  // Only a job's node 0 has a coordinator's board for them to feed.
  if (!RunsAsCluster(spec) || !HostsAgentStore(spec)) return nullptr;
  return std::make_shared<ConnectionHooks>();
}

Result<std::unique_ptr<ClusterNode>> MakeClusterNode(const LaunchSpec& spec,
                                                     const RankRuntime& runtime,
                                                     const ClusterNodeContext& context) {
  if (!RunsAsCluster(spec)) {
    return std::unique_ptr<ClusterNode>(std::make_unique<SingleNode>(context));
  }
  ClusterNodeSettings settings = MakeClusterNodeSettings(spec, runtime);
  settings.agent.events = context.events;
  settings.coordinator.events = context.events;
  return MakeBackendNode(spec, settings, context);
}

// NOLINTNEXTLINE(performance-unnecessary-value-param): the overrides keep `stacks`
void ClusterNode::WatchHangs(Supervisor& /*supervisor*/, JobStacks /*stacks*/,
                             const HangWatchDeps& /*deps*/, const HangWatchConfig& /*config*/) {}

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

ClusterNode::JobStacks ClusterNode::OwnStacksOnly(LocalStacks local) {
  return [local = std::move(local)](std::function<void(std::vector<NodeStacks>)> done) {
    local([done = std::move(done)](NodeStacks own) { done({std::move(own)}); });
  };
}

void ClusterNode::DescribeAgentJobEnd(const NodeAgent& agent, SummaryInput& in) {
  if (agent.join_error()) {
    in.job_outcome = in.exit_code == exit_code::kRendezvousFailed ? Outcome::kRendezvousFailed
                                                                  : Outcome::kJobError;
    in.job_json = {{"kind", std::string(OutcomeName(*in.job_outcome))},
                   {"what", agent.join_error()->Format()}};
    return;
  }
  if (!agent.outcome()) return;
  const job::StopMarker& m = *agent.outcome();
  in.job_outcome =
      m.kind == job::StopMarker::Kind::kJobError && m.exit_code == exit_code::kRendezvousFailed
          ? Outcome::kRendezvousFailed
          : job::OutcomeOfKind(m.kind);
  in.job_json = nlohmann::json::parse(job::Encode(m), nullptr, false);
  if (m.kind != job::StopMarker::Kind::kSuccess)
    in.job_cause = "the job stopped: " + job::Describe(m);
}

}  // namespace gculaunch
