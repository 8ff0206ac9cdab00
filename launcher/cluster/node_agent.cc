#include "launcher/cluster/node_agent.h"

#include "base/exit_codes.h"
#include "launcher/cluster/net_address.h"

namespace gculaunch {

using job::AgentAction;
using job::AgentEvent;
using Phase = job::AgentState::Phase;

NodeAgent::NodeAgent(boost::asio::io_context& io, AgentLink& link, RemoteAgentLink* remote,
                     JobPlanner& planner, NodeAgentSettings settings, spdlog::logger& log)
    : link_(link),
      remote_(remote),
      planner_(planner),
      settings_(std::move(settings)),
      log_(log),
      progress_timer_(io) {}

NodeAgent::~NodeAgent() = default;

void NodeAgent::Start() {
  started_ = std::chrono::steady_clock::now();
  if (settings_.is_master) {
    // Node 0 has no connection to the store: the route towards MASTER_ADDR names the
    // interface the other nodes reach it on.
    auto addr = RouteAddressTo(settings_.master_addr, settings_.agent_port);
    if (!addr.ok()) {
      log_.warn("{}; publishing MASTER_ADDR {} as this node's address", addr.error().what,
                settings_.master_addr);
    }
    Register(Advertised(addr.ok() ? *addr : settings_.master_addr));
    return;
  }
  remote_->Connect(lifetime_.Wrap([this](const Status& connected) {
    if (!connected.ok()) {
      JoinFailed(connected.error(), exit_code::kRendezvousFailed);
      return;
    }
    Register(Advertised(remote_->local_address()));
  }));
}

void NodeAgent::JoinFailed(Error error, int code) {
  log_.error("{}{}", error.what, error.hint.empty() ? "" : " (fix: " + error.hint + ")");
  join_error_ = std::move(error);
  supervisor_->JobExit(code);
}

std::string NodeAgent::Advertised(const std::string& found) const {
  // --local-addr (preset in the registration) wins over the address the route names.
  return settings_.registration.addr.empty() ? found : settings_.registration.addr;
}

void NodeAgent::Register(const std::string& addr) {
  settings_.registration.addr = addr;
  const std::string mine = job::Encode(settings_.registration);
  const int node = settings_.config.node_rank;
  link_.CompareSet(
      job::NodeKey(node), "", mine, lifetime_.Wrap([this, mine, node](Result<std::string> now) {
        if (state_.phase != Phase::kJoining) return;  // the Supervisor finished meanwhile
        if (!now.ok()) {
          JoinFailed(Error{"could not register with the master node: " + now.error().what,
                           "check the master node's gculaunch and the network between the nodes"},
                     exit_code::kRendezvousFailed);
          return;
        }
        if (*now != mine) {
          auto other = job::DecodeRegistration(*now);
          const std::string who = other.ok() ? job::NodeName(node, other->host, other->addr) +
                                                   " (pid " + std::to_string(other->pid) + ")"
                                             : "another node";
          JoinFailed(Error{"node rank " + std::to_string(node) + " is already taken by " + who,
                           "give every node a distinct node rank (RANK / --node-rank, 0.." +
                               std::to_string(settings_.registration.nnodes - 1) + ")"},
                     exit_code::kUsage);
          return;
        }
        log_.info("node {} of {} registered ({} rank(s), address {})", node,
                  settings_.registration.nnodes, settings_.registration.nproc,
                  settings_.registration.addr);
        if (remote_ != nullptr) {
          remote_->StartHeartbeat(lifetime_.Wrap(
              [this](std::string what) { Dispatch(AgentEvent::MasterLost(std::move(what))); }));
          ArmProgress();
        }
        Dispatch(AgentEvent::Joined());
      }));
}

// While a non-master node waits for the others: one line every progress_period.
void NodeAgent::ArmProgress() {
  progress_timer_.expires_after(settings_.progress_period);
  progress_timer_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec) {
    if (ec || state_.phase != Phase::kWaitingPlan || state_.epoch != 0) return;
    link_.Get(job::kMissingKey, lifetime_.Wrap([this](Result<std::string> text) {
      if (state_.phase != Phase::kWaitingPlan || state_.epoch != 0) return;
      const auto waited = std::chrono::duration_cast<std::chrono::seconds>(
          std::chrono::steady_clock::now() - started_);
      log_.info("connected to the master node; waiting for the job to start ({} s): {}",
                waited.count(),
                text.ok() && !text->empty() ? *text : "the master has not reported yet");
      ArmProgress();
    }));
  }));
}

void NodeAgent::LocalStop(const LocalStopReport& report) {
  Dispatch(AgentEvent::LocalStop(report));
}

void NodeAgent::AttemptDrained(bool success) { Dispatch(AgentEvent::Drained(success)); }

void NodeAgent::Finished(int exit_code) { Dispatch(AgentEvent::SupervisorFinished(exit_code)); }

void NodeAgent::Dispatch(const AgentEvent& event) {
  const bool had_marker = state_.marker.has_value();
  job::AgentStep step = job::Step(state_, settings_.config, event);
  state_ = step.state;
  if (event.kind == AgentEvent::Kind::kMasterLost && state_.marker && !had_marker) {
    LogMarker(*state_.marker);
  }
  for (const AgentAction& action : step.actions) Execute(action);
}

void NodeAgent::LogMarker(const job::StopMarker& m) {
  const std::string what = job::Describe(m);
  if (m.kind == job::StopMarker::Kind::kSuccess) {
    log_.info("{}", what);
    return;
  }
  if (job::Restartable(m, settings_.config.max_restarts)) {
    log_.warn("{}; every node restarts its ranks (restart {} of {})", what, m.epoch + 1,
              settings_.config.max_restarts);
    return;
  }
  const int code = job::ExitCodeFor(m, settings_.config.node_rank);
  std::string why;
  if (m.kind == job::StopMarker::Kind::kRankFailed && m.restartable &&
      settings_.config.max_restarts > 0) {
    why =
        ", no restart left (--max-restarts " + std::to_string(settings_.config.max_restarts) + ")";
  }
  log_.error("{}; every node stops (exit code {}{})", what, code, why);
}

void NodeAgent::StartRanks(const AgentAction& action) {
  const job::JobPlan& plan = action.plan;
  const job::PlanNode* mine = nullptr;
  for (const job::PlanNode& n : plan.nodes) {
    if (n.node_rank == settings_.config.node_rank) mine = &n;
  }
  if (mine == nullptr) {
    log_.error("the job's plan for epoch {} has no node {} (internal error)", plan.epoch,
               settings_.config.node_rank);
    supervisor_->JobExit(exit_code::kInternal);
    return;
  }
  const std::string port =
      plan.ranks_port != 0 ? std::to_string(plan.ranks_port) : settings_.ranks_port;
  planner_.ApplyLayout(mine->rank_offset, plan.world_size, port);
  const std::string ranks = mine->nproc == 1
                                ? "rank " + std::to_string(mine->rank_offset)
                                : "ranks " + std::to_string(mine->rank_offset) + "-" +
                                      std::to_string(mine->rank_offset + mine->nproc - 1);
  if (plan.epoch == 0) {
    log_.info("all {} nodes joined; WORLD_SIZE={}, this node runs {}", plan.nodes.size(),
              plan.world_size, ranks);
  } else {
    using Ms = std::chrono::duration<double, std::milli>;
    log_.warn(
        "restart {} of {}: starting {} again (TORCHELASTIC_RESTART_COUNT={}, {:.0f} ms "
        "after the stop)",
        plan.epoch, settings_.config.max_restarts, ranks, plan.epoch,
        Ms(std::chrono::steady_clock::now() - stop_seen_).count());
  }
  supervisor_->JobStart(plan.epoch);
}

void NodeAgent::Execute(const AgentAction& action) {
  using K = AgentAction::Kind;
  const int node = settings_.config.node_rank;
  auto lost_on_error = [this](const Status& s) {
    if (!s.ok()) Dispatch(AgentEvent::MasterLost(s.error().what));
  };
  switch (action.kind) {
    case K::kWaitPlan: {
      const int epoch = action.epoch;
      link_.WaitGet(job::PlanKey(epoch), lifetime_.Wrap([this, epoch](Result<std::string> text) {
        if (!text.ok()) {
          Dispatch(AgentEvent::MasterLost(text.error().what));
          return;
        }
        auto plan = job::DecodePlan(*text);
        if (!plan.ok()) {
          job::JobPlan bad;
          bad.epoch = epoch;
          bad.abort = job::StopMarker{};
          bad.abort->kind = job::StopMarker::Kind::kJobError;
          bad.abort->exit_code = exit_code::kUsage;
          bad.abort->what = "the master node sent an unreadable " + plan.error().what;
          plan = bad;
        }
        if (plan->abort) {
          outcome_ = *plan->abort;
          LogMarker(*plan->abort);
        }
        Dispatch(AgentEvent::Plan(std::move(*plan)));
      }));
      break;
    }
    case K::kStartRanks:
      StartRanks(action);
      break;
    case K::kWatchMarker: {
      link_.WaitGet(job::StopKey(action.epoch), lifetime_.Wrap([this](Result<std::string> text) {
        if (!text.ok()) {
          Dispatch(AgentEvent::MasterLost(text.error().what));
          return;
        }
        auto marker = job::DecodeMarker(*text);
        if (!marker.ok()) {
          Dispatch(AgentEvent::MasterLost("unreadable stop marker: " + marker.error().what));
          return;
        }
        stop_seen_ = std::chrono::steady_clock::now();
        LogMarker(*marker);
        outcome_ = *marker;
        Dispatch(AgentEvent::Marker(std::move(*marker)));
      }));
      break;
    }
    case K::kPublishMarker: {
      job::StopMarker m = action.marker;
      if (m.node == node) {
        m.host = settings_.registration.host;
        m.addr = settings_.registration.addr;
      }
      link_.CompareSet(job::StopKey(action.epoch), "", job::Encode(m),
                       lifetime_.Wrap([lost_on_error](const Result<std::string>& r) {
                         lost_on_error(r.ok() ? OkStatus() : Status(r.error()));
                       }));
      break;
    }
    case K::kStopRanks:
      supervisor_->JobStop();
      break;
    case K::kReportDone:
      link_.Set(job::DoneKey(action.epoch, node), "1", lifetime_.Wrap(lost_on_error));
      break;
    case K::kReportReaped:
      link_.Set(job::ReapedKey(action.epoch, node), "1", lifetime_.Wrap(lost_on_error));
      break;
    case K::kExitRanks:
      if (state_.marker) outcome_ = *state_.marker;
      supervisor_->JobExit(action.exit_code);
      break;
    case K::kSayBye:
      progress_timer_.cancel();
      if (remote_ != nullptr) remote_->StopHeartbeat();
      bye_pending_ = true;
      link_.Set(job::ByeKey(node), std::to_string(action.exit_code),
                lifetime_.Wrap([this](const Status&) {
                  finished_ = true;
                  link_.Close();
                }));
      break;
    case K::kFinish:
      if (!bye_pending_) {  // else once the bye was written (or failed)
        progress_timer_.cancel();
        finished_ = true;
        link_.Close();
      }
      break;
  }
}

}  // namespace gculaunch
