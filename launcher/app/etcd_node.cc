#include "launcher/app/etcd_node.h"

#include <algorithm>
#include <memory>
#include <sstream>

#include "launcher/cluster/etcd_options.h"
#include "launcher/cluster/net_address.h"

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

double Seconds(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count() / 1000.0;
}

}  // namespace

Result<std::unique_ptr<EtcdNode>> EtcdNode::Make(boost::asio::io_context& io,
                                                 const EtcdSettings& etcd,
                                                 EtcdNodeSettings settings, spdlog::logger& log) {
  auto options = MakeEtcdClientOptions(etcd);
  if (!options.ok()) return options.error();
  std::string local = settings.local_addr;
  if (local.empty()) {
    // The address of the interface that routes to etcd: the one the other nodes and the
    // ranks reach this node on (--local-addr overrides it).
    const etcd::Endpoint& first = options->endpoints.front();
    auto route = RouteAddressTo(first.host, first.port);
    if (!route.ok()) {
      return Error{"cannot find this node's address towards etcd at " + first.ToString() + ": " +
                       route.error().what,
                   "give this node's address with --local-addr"};
    }
    local = *route;
  }
  return std::unique_ptr<EtcdNode>(
      new EtcdNode(io, std::move(*options), etcd, std::move(settings), std::move(local), log));
}

EtcdNode::EtcdNode(boost::asio::io_context& io, etcd::ClientOptions options,
                   const EtcdSettings& etcd, EtcdNodeSettings settings, std::string local_addr,
                   spdlog::logger& log)
    : settings_(std::move(settings)),
      log_(log),
      endpoints_(JoinEndpoints(options)),
      retry_timer_(io) {
  member_ =
      std::make_unique<EtcdMember>(io, std::move(options), etcd.key_prefix,
                                   std::chrono::seconds(etcd.lease_ttl_s), settings_.identity);
  seat_ = std::make_unique<EtcdSeat>(*member_, settings_.seat, log_);
  board_ = std::make_unique<EtcdAgentBoard>(*member_, std::move(local_addr));
}

EtcdNode::~EtcdNode() {
  board_.reset();
  seat_.reset();
  member_.reset();
}

void EtcdNode::Start(std::function<void()> started, std::function<void(Error)> failed) {
  on_started_ = std::move(started);
  on_failed_ = std::move(failed);
  started_ = Clock::now();
  last_progress_ = started_;
  TryGrant();
}

// The lease is the first request: while it fails, etcd is unreachable (or refuses us).
void EtcdNode::TryGrant() {
  ++attempts_;
  member_->Start(lifetime_.Wrap([this](const Status& granted) {
    if (granted.ok() || member_->lease() != 0) {
      if (attempts_ > 1) {
        log_.info("reached etcd at {} after {} attempts in {:.1f} s", endpoints_, attempts_,
                  Seconds(Clock::now() - started_));
      }
      seat_->Start();
      if (on_started_) on_started_();
      return;
    }
    const auto now = Clock::now();
    const auto waited = now - started_;
    if (granted.error().exit_code == etcd::kRefusedExitCode) {
      // etcd answered and refused this node (certificate, password, permissions): waiting
      // changes nothing, so stop now with its reason and its fix.
      Error refused = granted.error();
      refused.what = "etcd refused this node: " + refused.what;
      if (on_failed_) on_failed_(std::move(refused));
      return;
    }
    if (waited >= settings_.rdzv_timeout) {
      std::ostringstream what;
      what << "could not reach etcd at " << endpoints_ << " after " << attempts_ << " attempts in "
           << Seconds(waited) << " s (--rdzv-timeout " << Seconds(settings_.rdzv_timeout)
           << " s); last error: " << granted.error().what;
      // The client's own hint names what to fix (a client certificate, a password, ...).
      std::string hint = granted.error().hint;
      if (hint.empty()) {
        hint =
            "check that etcd runs at --rdzv-endpoint and that this node can reach it "
            "(gculaunch check --rdzv-backend etcd ...)";
      }
      hint += "; raise --rdzv-timeout if etcd starts later";
      if (on_failed_) on_failed_(Error{what.str(), std::move(hint)});
      return;
    }
    if (now - last_progress_ >= settings_.progress_period) {
      last_progress_ = now;
      log_.info(
          "waiting for etcd at {}: {} attempt(s) in {:.1f} s, last: {}; waiting up to "
          "{:.1f} s (--rdzv-timeout)",
          endpoints_, attempts_, Seconds(waited), granted.error().what,
          Seconds(settings_.rdzv_timeout));
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(settings_.rdzv_timeout - waited);
    retry_timer_.expires_after(std::min(backoff_, std::max(left, std::chrono::milliseconds(1))));
    backoff_ = std::min(backoff_ * 2, std::chrono::milliseconds(1000));
    retry_timer_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec) {
      if (!ec) TryGrant();
    }));
  }));
}

bool EtcdNode::Done(const NodeAgent& agent) {
  if (!agent.finished()) return false;
  seat_->Stop();  // this node campaigns no more
  return seat_->idle();
}

void EtcdNode::Leave(boost::asio::io_context& io, std::chrono::milliseconds bound) {
  if (member_->lease() == 0) return;
  auto revoked = std::make_shared<bool>(false);
  member_->Revoke([revoked](const Status&) { *revoked = true; });
  const auto until = Clock::now() + bound;
  while (!*revoked) {
    if (io.run_one_until(until) == 0) break;
  }
}

}  // namespace gculaunch
