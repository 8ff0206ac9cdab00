#include "launcher/cluster/etcd/etcd_cluster_node.h"

#include <algorithm>
#include <memory>
#include <sstream>
#include <utility>

#include "base/exit_codes.h"
#include "base/text.h"
#include "launcher/cluster/etcd/etcd_options.h"
#include "launcher/cluster/net_address.h"
#include "launcher/cluster/rdzv_backends.h"

namespace gculaunch {

namespace {

using Clock = std::chrono::steady_clock;

std::string JoinEndpoints(const etcd::ClientOptions& options) {
  std::string out;
  for (const etcd::Endpoint& e : options.endpoints) {
    if (!out.empty()) out += ",";
    out += e.ToString();
  }
  return out;
}

}  // namespace

// Every node campaigns; the term's leader serves the ranks' store on MASTER_PORT and runs the
// coordinator (docs/etcd.md, "Job rendezvous on etcd").
ClusterNodeMade MakeEtcdClusterNode(const EtcdSettings& etcd, const LaunchSpec& spec,
                                    const ClusterNodeSettings& settings,
                                    const ClusterNodeContext& context) {
  auto options = MakeEtcdClientOptions(etcd);
  if (!options.ok()) return options.error();
  EtcdClusterNodeSettings s;
  s.seat.coordinator = settings.coordinator;
  s.seat.ranks_host = "";  // every interface, IPv4 and IPv6
  s.seat.ranks_port = static_cast<std::uint16_t>(spec.agent_port);
  s.agent = settings.agent;
  const job::NodeRegistration& reg = settings.agent.registration;
  s.identity = EtcdIdentity{reg.host, reg.pid, reg.incarnation};
  s.key_prefix = etcd.key_prefix;
  s.lease_ttl = std::chrono::seconds(etcd.lease_ttl_s);
  s.local_addr = spec.local_addr;
  s.rdzv_timeout = settings.agent.rdzv_timeout;
  auto node = EtcdClusterNode::Make(context.io, std::move(*options), std::move(s), context.planner,
                                    context.log);
  if (!node.ok()) return node.error();
  return std::unique_ptr<ClusterNode>(std::move(*node));
}

Result<std::unique_ptr<EtcdClusterNode>> EtcdClusterNode::Make(boost::asio::io_context& io,
                                                               etcd::ClientOptions options,
                                                               EtcdClusterNodeSettings settings,
                                                               RankPlanner& planner,
                                                               spdlog::logger& log) {
  std::string local = settings.local_addr;
  if (local.empty()) {
    // The address of the interface that routes to etcd: the one the other nodes and the
    // ranks reach this node on (--local-addr overrides it).
    const etcd::Endpoint& first = options.endpoints.front();
    auto route = RouteAddressTo(first.host, first.port);
    if (!route.ok()) {
      return Error{"cannot find this node's address towards etcd at " + first.ToString() + ": " +
                       route.error().what,
                   "give this node's address with --local-addr"};
    }
    local = *route;
  }
  return std::unique_ptr<EtcdClusterNode>(new EtcdClusterNode(
      io, std::move(options), std::move(settings), std::move(local), planner, log));
}

EtcdClusterNode::EtcdClusterNode(boost::asio::io_context& io, etcd::ClientOptions options,
                                 EtcdClusterNodeSettings settings, std::string local_addr,
                                 RankPlanner& planner, spdlog::logger& log)
    : io_(io),
      settings_(std::move(settings)),
      log_(log),
      endpoints_(JoinEndpoints(options)),
      retry_timer_(io) {
  member_ = std::make_unique<EtcdMember>(io, std::move(options), settings_.key_prefix,
                                         settings_.lease_ttl, settings_.identity);
  seat_ = std::make_unique<EtcdSeat>(*member_, settings_.seat, log_);
  board_ = std::make_unique<EtcdAgentBoard>(*member_, std::move(local_addr));
  agent_ = std::make_unique<NodeAgent>(io, *board_, planner, settings_.agent, log_);
}

// Each part before what it uses: the agent's and the exchanges' boards, the seat's member.
EtcdClusterNode::~EtcdClusterNode() {
  dump_responder_.reset();
  agent_.reset();
  board_.reset();
  seat_.reset();
  member_.reset();
}

void EtcdClusterNode::Start(JobControl& ranks) {
  agent_->Attach(ranks);
  started_ = Clock::now();
  last_progress_ = started_;
  TryGrant();
}

// The lease is the first request: while it fails, etcd is unreachable (or refuses us).
void EtcdClusterNode::TryGrant() {
  ++attempts_;
  member_->Start(lifetime_.Wrap([this](const Status& granted) {
    if (granted.ok() || member_->lease() != 0) {
      Granted();
    } else {
      Retry(granted.error());
    }
  }));
}

void EtcdClusterNode::Granted() {
  if (attempts_ > 1) {
    log_.info("reached etcd at {} after {} attempts in {}", endpoints_, attempts_,
              Seconds(Clock::now() - started_));
  }
  seat_->Start();
  agent_->Start();
}

void EtcdClusterNode::Retry(const Error& error) {
  const auto now = Clock::now();
  const auto waited = now - started_;
  if (error.exit_code == etcd::kRefusedExitCode) {
    // etcd answered and refused this node (certificate, password, permissions): waiting
    // changes nothing, so stop now with its reason and its fix, and its own exit code (a
    // configuration to fix).
    Error refused = error;
    refused.what = "etcd refused this node: " + refused.what;
    const int code = refused.exit_code;
    agent_->JoinFailed(std::move(refused), code);
    return;
  }
  if (waited >= settings_.rdzv_timeout) {
    std::ostringstream what;
    what << "could not reach etcd at " << endpoints_ << " after " << attempts_ << " attempts in "
         << Seconds(waited) << " (--rdzv-timeout " << Seconds(settings_.rdzv_timeout, -1)
         << "); last error: " << error.what;
    // The client's own hint names what to fix (a client certificate, a password, ...).
    std::string hint = error.hint;
    if (hint.empty()) {
      hint =
          "check that etcd runs at --rdzv-endpoint and that this node can reach it "
          "(gculaunch check --rdzv-backend etcd ...)";
    }
    hint += "; raise --rdzv-timeout if etcd starts later";
    agent_->JoinFailed(Error{what.str(), std::move(hint)}, exit_code::kRendezvousFailed);
    return;
  }
  if (now - last_progress_ >= settings_.progress_period) {
    last_progress_ = now;
    log_.info(
        "waiting for etcd at {}: {} attempt(s) in {}, last: {}; waiting up to {} "
        "(--rdzv-timeout)",
        endpoints_, attempts_, Seconds(waited), error.what, Seconds(settings_.rdzv_timeout, -1));
  }
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(settings_.rdzv_timeout - waited);
  retry_timer_.expires_after(std::min(backoff_, std::max(left, std::chrono::milliseconds(1))));
  backoff_ = std::min(backoff_ * 2, std::chrono::milliseconds(1000));
  retry_timer_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec) {
    if (!ec) TryGrant();
  }));
}

// Every node answers the stack requests of the term's leader, as the built-in store's other
// nodes answer node 0's.
ClusterNode::JobStacks EtcdClusterNode::ShareStacks(LocalStacks local) {
  dump_responder_.emplace(io_, *board_, local);
  dump_responder_->Start();
  return OwnStacksOnly(std::move(local));
}

void EtcdClusterNode::Finish(std::chrono::steady_clock::time_point bound) {
  WaitUntil(io_, bound, [this] { return Done(); });
  if (!Done()) log_.warn("leaving the job on etcd although not every node said bye");
  Leave();
  dump_responder_.reset();
}

bool EtcdClusterNode::Done() {
  if (!agent_->finished()) return false;
  seat_->Stop();  // this node campaigns no more
  return seat_->idle();
}

void EtcdClusterNode::Leave() {
  if (member_->lease() == 0) return;
  auto revoked = std::make_shared<bool>(false);
  member_->Revoke([revoked](const Status&) { *revoked = true; });
  const auto until = Clock::now() + settings_.leave_bound;
  while (!*revoked) {
    if (io_.run_one_until(until) == 0) break;
  }
}

}  // namespace gculaunch
