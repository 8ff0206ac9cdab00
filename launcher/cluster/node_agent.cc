#include "launcher/cluster/node_agent.h"

#include <algorithm>

#include "base/exit_codes.h"
#include "base/text.h"
#include "launcher/cluster/net_address.h"

namespace gculaunch {

using job::AgentAction;
using job::AgentEvent;
using Phase = job::AgentState::Phase;
using Clock = std::chrono::steady_clock;

NodeAgent::NodeAgent(boost::asio::io_context& io, AgentBoard& board, RankPlanner& planner,
                     NodeAgentSettings settings, spdlog::logger& log)
    : board_(board),
      planner_(planner),
      settings_(std::move(settings)),
      log_(log),
      progress_timer_(io) {}

NodeAgent::~NodeAgent() = default;

template <typename F>
auto NodeAgent::Current(F f) {
  return lifetime_.Wrap([this, generation = joins_, f = std::move(f)](auto&&... args) mutable {
    if (generation == joins_) f(std::forward<decltype(args)>(args)...);
  });
}

void NodeAgent::Start() {
  started_ = Clock::now();
  Dispatch(AgentEvent::Start());
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

// (Re)connects and sends a join request.  A join after the first one is a return: node 0, or
// this node's place in the job, was lost; it may take --rdzv-timeout from that moment.
void NodeAgent::Join() {
  ++joins_;
  connected_ = false;
  board_.Quiet();
  const auto now = Clock::now();
  const bool rejoin = joins_ > 1;
  if (rejoin && !lost_since_) lost_since_ = now;
  auto deadline = settings_.rdzv_timeout;
  if (rejoin) {
    deadline -= std::chrono::duration_cast<std::chrono::milliseconds>(now - *lost_since_);
    deadline = std::max(deadline, std::chrono::milliseconds(1));
  }
  if (settings_.is_node0) {
    // Node 0 has no connection to the store: the route towards MASTER_ADDR names the
    // interface the other nodes reach it on.
    auto addr = RouteAddressTo(settings_.master_addr, settings_.agent_port);
    if (!addr.ok()) {
      log_.warn("{}; publishing MASTER_ADDR {} as this node's address", addr.error().what,
                settings_.master_addr);
    }
    connected_ = true;
    SendJoin(Advertised(addr.ok() ? *addr : settings_.master_addr));
    return;
  }
  board_.Connect(rejoin, deadline, Current([this, rejoin](const Status& connected) {
                   if (connected.ok()) {
                     connected_ = true;
                     SendJoin(Advertised(board_.LocalAddress()));
                     return;
                   }
                   // A refusal (the job secrets differ) carries its own exit code.
                   if (!rejoin || connected.error().exit_code != 0) {
                     const int code = connected.error().exit_code != 0
                                          ? connected.error().exit_code
                                          : exit_code::kRendezvousFailed;
                     JoinFailed(connected.error(), code);
                     return;
                   }
                   // Returning, the board tried until the deadline: the policy decides what that
                   // means.
                   Dispatch(AgentEvent::RejoinDeadline(connected.error().what));
                 }));
}

// First the job's own registration: a node of another job, or with a node rank the job does
// not have, is refused here (the coordinator watches only the job's node ranks).
void NodeAgent::SendJoin(const std::string& addr) {
  settings_.registration.addr = addr;
  settings_.registration.last_epoch = state_.last_epoch;
  settings_.registration.last_restarts = state_.last_epoch >= 0 ? state_.restarts : -1;
  board_.ReadJobInfo(Current([this](Result<std::string> text) {
    if (!text.ok()) {
      Dispatch(AgentEvent::Node0Lost(text.error().what));
      return;
    }
    auto node0 = job::DecodeRegistration(*text);
    if (!text->empty() && node0.ok()) {
      Status fits = job::CheckIdentity(settings_.registration, *node0);
      if (fits.ok() && settings_.registration.node_rank >= node0->nnodes) {
        fits = job::CheckRegistration(settings_.registration, *node0);
      }
      if (!fits.ok()) {
        Refused(fits.error());
        return;
      }
    }
    SendJoinRequest();
  }));
}

void NodeAgent::Refused(const Error& why) {
  job::StopMarker m;
  m.kind = job::StopMarker::Kind::kJobError;
  m.exit_code = exit_code::kUsage;
  m.restartable = false;
  m.what = "refused: " + why.what + " (fix: " + why.hint + ")";
  outcome_ = m;
  Execute(job::MarkerLog(m, settings_.config));
  supervisor_->JobExit(exit_code::kUsage);
}

void NodeAgent::SendJoinRequest() {
  if (job::Elastic(settings_.registration) && !settings_.is_node0) {
    // Elastic: every join request gets a fresh node id; the node rank comes with the plan.
    board_.TakeId(Current([this](Result<int> id) {
      if (!id.ok()) {
        Dispatch(AgentEvent::Node0Lost(id.error().what));
        return;
      }
      settings_.config.node_rank = *id;
      settings_.registration.node_rank = *id;
      SendRegistration();
    }));
    return;
  }
  SendRegistration();
}

void NodeAgent::SendRegistration() {
  board_.Join(job::Encode(settings_.registration), Current([this](Result<int> seq) {
                if (!seq.ok()) {
                  Dispatch(AgentEvent::Node0Lost(seq.error().what));
                  return;
                }
                const int node = settings_.config.node_rank;
                if (job::Elastic(settings_.registration)) {
                  log_.info("asked to join the job as node id {} ({} rank(s), address {})", node,
                            settings_.registration.nproc, settings_.registration.addr);
                } else if (joins_ == 1) {
                  log_.info("node {} of {} registered ({} rank(s), address {})", node,
                            settings_.registration.nnodes, settings_.registration.nproc,
                            settings_.registration.addr);
                } else {
                  log_.info("asked to join the job again as node {} (address {}, last epoch {})",
                            node, settings_.registration.addr, state_.last_epoch);
                }
                board_.Beat(*seq, Current([this](std::string what) {
                  Dispatch(AgentEvent::Node0Lost(std::move(what)));
                }));
                ArmProgress();
                const int request = *seq;
                board_.WaitAdmission(request, Current([this, request](Result<std::string> text) {
                                       if (!text.ok()) {
                                         Dispatch(AgentEvent::Node0Lost(text.error().what));
                                         return;
                                       }
                                       seq_ = request;
                                       Admitted(std::move(text));
                                     }));
              }));
}

namespace {

job::JobPlan Unreadable(int epoch, const std::string& what) {
  job::JobPlan bad;
  bad.epoch = epoch;
  bad.abort = job::StopMarker{};
  bad.abort->kind = job::StopMarker::Kind::kJobError;
  bad.abort->exit_code = exit_code::kUsage;
  bad.abort->what = "the master node sent an unreadable " + what;
  return bad;
}

}  // namespace

void NodeAgent::Admitted(Result<std::string> text) {
  auto plan = job::DecodePlan(*text);
  if (!plan.ok()) plan = Unreadable(state_.last_epoch + 1, plan.error().what);
  // A node 0 that sends this node its own plan writes the later ones to its own key too; an
  // older one writes only the whole plan.
  if (!plan->abort) own_plans_ = plan->nnodes > 0;
  lost_since_.reset();
  Dispatch(AgentEvent::Plan(std::move(*plan)));
}

// While a node other than 0 waits for the others: one line every progress_period.
void NodeAgent::ArmProgress() {
  if (settings_.is_node0) return;
  progress_timer_.expires_after(settings_.progress_period);
  progress_timer_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec) {
    const auto waiting = [this] {
      return (state_.phase == Phase::kJoining && connected_) || state_.phase == Phase::kWaitingPlan;
    };
    if (ec || !waiting()) return;
    board_.ReadMissing(lifetime_.Wrap([this, waiting](Result<std::string> text) {
      if (!waiting()) return;
      const auto waited = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - started_);
      const bool first = state_.last_epoch < 0;
      log_.info("connected to the master node; waiting for the job to {} ({} s): {}",
                first ? "start" : "re-form", waited.count(),
                text.ok() && !text->empty() ? *text : "the master has not reported yet");
      ArmProgress();
    }));
  }));
}

void NodeAgent::LocalStop(const LocalStopReport& report) {
  Dispatch(AgentEvent::LocalStop(report));
}

void NodeAgent::AttemptDrained(bool success, const AttemptReport& report) {
  drained_ = report;
  Dispatch(AgentEvent::Drained(success));
}

void NodeAgent::Finished(int exit_code) {
  Dispatch(AgentEvent::SupervisorFinished(exit_code, unhealthy_));
}

void NodeAgent::Unhealthy(const std::string& what) { unhealthy_ = what; }

void NodeAgent::Dispatch(const AgentEvent& event) {
  const std::optional<job::StopMarker> known = state_.marker;
  job::AgentStep step = job::Step(state_, settings_.config, event);
  state_ = step.state;
  // What ended the epoch (or the job) so far: the marker the policy now goes by.
  if (state_.marker && state_.marker != known) outcome_ = *state_.marker;
  // The policy tells a loss of node 0 once (per return): the event log records it then, with
  // the time this node noticed it.
  const bool told = std::any_of(step.actions.begin(), step.actions.end(), [](const AgentAction& a) {
    return a.kind == AgentAction::Kind::kLog;
  });
  if (event.kind == AgentEvent::Kind::kNode0Lost && told) {
    settings_.events->On(JobEvent::NodeLoss(0, event.what));
  }
  for (const AgentAction& action : step.actions) Execute(action);
}

void NodeAgent::Log(const AgentAction& action) {
  switch (action.level) {
    case AgentAction::Level::kInfo:
      log_.info("{}", action.text);
      break;
    case AgentAction::Level::kWarn:
      log_.warn("{}", action.text);
      break;
    case AgentAction::Level::kError:
      log_.error("{}", action.text);
      break;
  }
}

void NodeAgent::StartRanks(const AgentAction& action) {
  const job::JobPlan& plan = action.plan;
  const job::PlanNode* mine = nullptr;
  for (const job::PlanNode& n : plan.nodes) {
    if (n.id == settings_.config.node_rank) mine = &n;
  }
  if (mine == nullptr) {
    log_.error("the job's plan for epoch {} has no node {} (internal error)", plan.epoch,
               settings_.config.node_rank);
    supervisor_->JobExit(exit_code::kInternal);
    return;
  }
  progress_timer_.cancel();
  const std::string port =
      plan.ranks_port != 0 ? std::to_string(plan.ranks_port) : settings_.ranks_port;
  RankPlanner::Layout layout;
  layout.rank_offset = mine->rank_offset;
  layout.world_size = plan.world_size;
  layout.node_rank = mine->node_rank;
  layout.nnodes = job::NodeCount(plan);
  layout.restarts = job::RestartsOf(plan);
  layout.ranks_port = port;
  // An elected leader: the ranks' store is wherever the plan's node rank 0 runs, so
  // MASTER_ADDR is that node's address (MASTER_PORT the plan's ranks port).
  if (settings_.config.elected_leader) layout.master_addr = job::LeaderAddr(plan);
  planner_.ApplyLayout(layout);
  if (job::Elastic(settings_.registration)) LogElasticLayout(plan, *mine);
  const std::string ranks = mine->nproc == 1
                                ? "rank " + std::to_string(mine->rank_offset)
                                : "ranks " + std::to_string(mine->rank_offset) + "-" +
                                      std::to_string(mine->rank_offset + mine->nproc - 1);
  if (plan.epoch == 0) {
    log_.info("all {} nodes joined; WORLD_SIZE={}, this node runs {}", job::NodeCount(plan),
              plan.world_size, ranks);
  } else if (job::Elastic(settings_.registration)) {
    // LogElasticLayout said it all.
  } else if (stop_seen_ == Clock::time_point{}) {
    log_.warn("joined the job at restart {} of {}: starting {} (TORCHELASTIC_RESTART_COUNT={})",
              plan.epoch, settings_.config.max_restarts, ranks, plan.epoch);
  } else {
    using Ms = std::chrono::duration<double, std::milli>;
    const std::string backoff =
        plan.backoff_s > 0
            ? ", of which " + Seconds(std::chrono::duration<double>(plan.backoff_s), -1) +
                  " back-off (--restart-backoff)"
            : "";
    log_.warn(
        "restart {} of {}: starting {} again (TORCHELASTIC_RESTART_COUNT={}, {:.0f} ms "
        "after the stop{})",
        plan.epoch, settings_.config.max_restarts, ranks, plan.epoch,
        Ms(Clock::now() - stop_seen_).count(), backoff);
    JobEvent restart = JobEvent::Restart(plan.epoch, settings_.config.max_restarts,
                                         outcome_ ? job::Describe(*outcome_) : "",
                                         Ms(Clock::now() - stop_seen_).count() / 1000);
    restart.backoff_s = plan.backoff_s;
    settings_.events->On(restart);
  }
  settings_.events->On(JobEvent::Rendezvous(
      plan.epoch, job::NodeCount(plan), plan.world_size,
      std::chrono::duration<double>(Clock::now() -
                                    (stop_seen_ == Clock::time_point{} ? started_ : stop_seen_))
          .count()));
  supervisor_->JobStart(plan.epoch);
}

// Elastic: each epoch's node ranks, in the form of the start's layout line.  A node's own
// plan does not list the others (node 0's log names who joined and who left).
void NodeAgent::LogElasticLayout(const job::JobPlan& plan, const job::PlanNode& mine) {
  std::string nodes;
  if (plan.nnodes == 0 && !plan.nodes.empty()) {  // the whole plan (an older node 0)
    for (const job::PlanNode& n : plan.nodes) {
      nodes += (nodes.empty() ? " [" : ", ") + std::to_string(n.node_rank) + "=" +
               (n.host.empty() ? n.addr : n.host) + " x" + std::to_string(n.nproc);
    }
    nodes += "]";
  }
  log_.info(
      "layout: epoch {}: {} nodes{}, this node is node rank {} (GROUP_RANK) with ranks {}-{} "
      "of WORLD_SIZE={} (TORCHELASTIC_RESTART_COUNT={})",
      plan.epoch, job::NodeCount(plan), nodes, mine.node_rank, mine.rank_offset,
      mine.rank_offset + mine.nproc - 1, plan.world_size, job::RestartsOf(plan));
}

// A node that stayed in the job: the next epoch's plan (or its abort).
void NodeAgent::WaitPlan(int epoch) {
  ArmProgress();
  board_.WaitPlan(epoch, own_plans_, Current([this, epoch](Result<std::string> text) {
                    if (!text.ok()) {
                      Dispatch(AgentEvent::Node0Lost(text.error().what));
                      return;
                    }
                    auto plan = job::DecodePlan(*text);
                    if (!plan.ok()) plan = Unreadable(epoch, plan.error().what);
                    Dispatch(AgentEvent::Plan(std::move(*plan)));
                  }));
}

// The epoch's stop marker, whoever writes it first.
void NodeAgent::WatchMarker(int epoch) {
  board_.WaitMarker(
      epoch, Current([this](Result<std::string> text) {
        if (!text.ok()) {
          Dispatch(AgentEvent::Node0Lost(text.error().what));
          return;
        }
        auto marker = job::DecodeMarker(*text);
        if (!marker.ok()) {
          Dispatch(AgentEvent::Node0Lost("unreadable stop marker: " + marker.error().what));
          return;
        }
        stop_seen_ = Clock::now();
        outcome_ = *marker;
        Dispatch(AgentEvent::Marker(std::move(*marker)));
      }));
}

void NodeAgent::Execute(const AgentAction& action) {
  using K = AgentAction::Kind;
  auto lost_on_error = Current([this](const Status& s) {
    if (!s.ok()) Dispatch(AgentEvent::Node0Lost(s.error().what));
  });
  switch (action.kind) {
    case K::kJoin:
      Join();
      break;
    case K::kWaitPlan:
      WaitPlan(action.epoch);
      break;
    case K::kStartRanks:
      StartRanks(action);
      break;
    case K::kWatchMarker:
      WatchMarker(action.epoch);
      break;
    case K::kPublishMarker: {
      job::StopMarker m = action.marker;
      if (m.node == settings_.config.node_rank) {
        m.host = settings_.registration.host;
        m.addr = settings_.registration.addr;
      }
      board_.PublishMarker(action.epoch, job::Encode(m),
                           [lost_on_error](const Result<std::string>& r) mutable {
                             lost_on_error(r.ok() ? OkStatus() : Status(r.error()));
                           });
      break;
    }
    case K::kStopRanks:
      supervisor_->JobStop();
      break;
    case K::kReportDone:
      board_.ReportDone(action.epoch, lost_on_error);
      break;
    case K::kReportReaped:
      board_.ReportReaped(action.epoch, job::Encode(drained_), lost_on_error);
      break;
    case K::kExitRanks:
      if (state_.marker) outcome_ = *state_.marker;
      supervisor_->JobExit(action.exit_code);
      break;
    case K::kSayBye:
      progress_timer_.cancel();
      board_.Quiet();
      bye_pending_ = true;
      board_.SayBye(seq_, action.exit_code, lifetime_.Wrap([this](const Status&) {
        finished_ = true;
        board_.Close();
      }));
      break;
    case K::kFinish:
      if (!bye_pending_) {  // else once the bye was written (or failed)
        progress_timer_.cancel();
        finished_ = true;
        board_.Close();
      }
      break;
    case K::kLog:
      Log(action);
      break;
  }
}

}  // namespace gculaunch
