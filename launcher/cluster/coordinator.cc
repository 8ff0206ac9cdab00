#include "launcher/cluster/coordinator.h"

#include <cstdlib>
#include <string_view>

#include "launcher/sys/free_port.h"

namespace gculaunch {

using job::CoordinatorAction;
using job::CoordinatorEvent;
using Phase = job::CoordinatorState::Phase;
using Clock = std::chrono::steady_clock;

Coordinator::Coordinator(boost::asio::io_context& io, rendezvous::Server& server,
                         AttemptObserver& attempts, CoordinatorSettings settings,
                         spdlog::logger& log)
    : server_(server),
      attempts_(attempts),
      settings_(std::move(settings)),
      log_(log),
      missing_timer_(io),
      deadline_timer_(io),
      heartbeat_timer_(io) {}

Coordinator::~Coordinator() = default;

rendezvous::ServerOptions ConnectionHooks::Options(const std::shared_ptr<ConnectionHooks>& hooks) {
  rendezvous::ServerOptions options;
  options.request_observer = [hooks](rendezvous::ConnId id, const rendezvous::Request& r) {
    if (hooks->target != nullptr) hooks->target->OnRequest(id, r);
  };
  options.connection_observer = [hooks](rendezvous::ConnId id) {
    if (hooks->target != nullptr) hooks->target->OnConnectionEnd(id);
  };
  return options;
}

void Coordinator::OnRequest(rendezvous::ConnId id, const rendezvous::Request& request) {
  // Only a node that joined heartbeats; its heartbeat names its control connection.
  static constexpr std::string_view kBeat = "gculaunch/job/hb/";
  if (request.op != rendezvous::Op::kAdd || request.keys.size() != 1) return;
  const std::string& key = request.keys[0];
  if (!key.starts_with(kBeat) || control_conns_.count(id) != 0) return;
  const int node = std::atoi(key.c_str() + kBeat.size());
  if (node > 0 && node < settings_.config.nnodes) control_conns_[id] = node;
}

void Coordinator::OnConnectionEnd(rendezvous::ConnId id) {
  auto it = control_conns_.find(id);
  if (it == control_conns_.end()) return;
  const int node = it->second;
  control_conns_.erase(it);
  if (finished() || server_.Get(job::ByeKey(node))) return;  // it said bye first
  Dispatch(CoordinatorEvent::NodeSilent(
      node, "its gculaunch closed its connection without a bye (killed?)"));
}

void Coordinator::Start() {
  started_ = Clock::now();
  const int nnodes = settings_.config.nnodes;
  for (int k = 0; k < nnodes; ++k) {
    server_.AsyncWait({job::NodeKey(k)}, lifetime_.Wrap([this, k](bool ok) {
      if (!ok) return;
      auto reg = job::DecodeRegistration(server_.Get(job::NodeKey(k)).value_or(""));
      if (!reg.ok()) {
        Dispatch(CoordinatorEvent::BadRegistration(k, reg.error().what));
        return;
      }
      if (reg->node_rank != k) {
        Dispatch(CoordinatorEvent::BadRegistration(
            k, "registration naming node " + std::to_string(reg->node_rank)));
        return;
      }
      beats_[k] = {"", Clock::now()};
      Dispatch(CoordinatorEvent::Registered(std::move(*reg)));
    }));
    server_.AsyncWait({job::ByeKey(k)}, lifetime_.Wrap([this, k](bool ok) {
      if (!ok) return;
      const int code = std::atoi(server_.Get(job::ByeKey(k)).value_or("0").c_str());
      Dispatch(CoordinatorEvent::Bye(k, code));
    }));
  }
  deadline_timer_.expires_after(settings_.rdzv_timeout);
  deadline_timer_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec) {
    if (!ec) Dispatch(CoordinatorEvent::RendezvousTimeout());
  }));
  ArmMissing();
  ArmHeartbeatCheck();
}

void Coordinator::ArmMissing() {
  missing_timer_.expires_after(settings_.missing_period);
  missing_timer_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec) {
    if (ec || finished()) return;
    Dispatch(CoordinatorEvent::MissingTick());
    ArmMissing();
  }));
}

void Coordinator::ArmHeartbeatCheck() {
  heartbeat_timer_.expires_after(settings_.heartbeat_check);
  heartbeat_timer_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec) {
    if (ec || finished()) return;
    CheckHeartbeats();
    ArmHeartbeatCheck();
  }));
}

// A node beats by bumping job/hb/<k>; the value changing is all that matters.
void Coordinator::CheckHeartbeats() {
  const auto now = Clock::now();
  // This process itself did not run for a while (a stopped or starved gculaunch): heartbeats
  // may be waiting unread in the sockets.  Start counting again rather than blame the nodes.
  const bool was_away = last_check_ != Clock::time_point{} &&
                        now - last_check_ > settings_.heartbeat_check + std::chrono::seconds(1);
  last_check_ = now;
  for (auto& [node, beat] : beats_) {
    if (was_away) {
      beat.changed = now;
      continue;
    }
    if (node == 0 || state_.bye.count(node) != 0 || state_.lost.count(node) != 0) continue;
    std::string value = server_.Get(job::HeartbeatKey(node)).value_or("");
    if (value != beat.value) {
      beat.value = std::move(value);
      beat.changed = now;
      continue;
    }
    const auto silent = now - beat.changed;
    if (silent >= settings_.heartbeat_timeout) {
      char text[96];
      std::snprintf(text, sizeof text, "no heartbeat for %.1f s",
                    std::chrono::duration<double>(silent).count());
      Dispatch(CoordinatorEvent::NodeSilent(node, text));
      if (finished()) return;
    }
  }
}

void Coordinator::Dispatch(const CoordinatorEvent& event) {
  job::CoordinatorStep step = job::Step(state_, settings_.config, event);
  state_ = step.state;
  for (const CoordinatorAction& action : step.actions) Execute(action);
}

void Coordinator::WatchEpoch(int epoch) {
  server_.AsyncWait({job::StopKey(epoch)}, lifetime_.Wrap([this, epoch](bool ok) {
    if (!ok) return;
    auto marker = job::DecodeMarker(server_.Get(job::StopKey(epoch)).value_or(""));
    if (!marker.ok()) {
      log_.error("unreadable stop marker for epoch {}: {}", epoch, marker.error().what);
      return;
    }
    stopped_ = Clock::now();
    Dispatch(CoordinatorEvent::Marker(std::move(*marker)));
  }));
  for (int k = 0; k < settings_.config.nnodes; ++k) {
    server_.AsyncWait({job::DoneKey(epoch, k)}, lifetime_.Wrap([this, epoch, k](bool ok) {
      if (ok) Dispatch(CoordinatorEvent::Done(epoch, k));
    }));
    server_.AsyncWait({job::ReapedKey(epoch, k)}, lifetime_.Wrap([this, epoch, k](bool ok) {
      if (ok) Dispatch(CoordinatorEvent::Reaped(epoch, k));
    }));
  }
}

void Coordinator::Execute(const CoordinatorAction& action) {
  using K = CoordinatorAction::Kind;
  switch (action.kind) {
    case K::kPublishPlan: {
      job::JobPlan plan = action.plan;
      if (!plan.abort) {  // an abort is logged by every node's agent
        if (settings_.ranks_port > 0) {
          plan.ranks_port = settings_.ranks_port;
        } else if (settings_.ranks_port < 0) {
          // --no-agent-store: rank 0 (on this node) hosts the ranks' store; a port free now,
          // fresh per epoch so that the previous attempt's sockets cannot be in the way.
          auto port = sys::PickFreePort();
          if (!port.ok()) {
            log_.error("no free port for rank 0's store: {}", port.error().what);
          } else {
            plan.ranks_port = *port;
          }
        }
        if (plan.epoch == 0) {
          std::string nodes;
          for (const job::PlanNode& n : plan.nodes) {
            if (!nodes.empty()) nodes += ", ";
            nodes += job::NodeName(n.node_rank, n.host, n.addr) + " x" + std::to_string(n.nproc);
          }
          using Ms = std::chrono::duration<double, std::milli>;
          log_.info("rendezvous complete in {:.0f} ms: {}", Ms(Clock::now() - started_).count(),
                    nodes);
        }
      }
      server_.Set(job::PlanKey(plan.epoch), job::Encode(plan));
      break;
    }
    case K::kBeginAttempt: {
      using Ms = std::chrono::duration<double, std::milli>;
      log_.info(
          "every node reaped its ranks of epoch {} ({:.0f} ms after the stop); restart {} "
          "begins",
          action.epoch - 1, Ms(Clock::now() - stopped_).count(), action.epoch);
      attempts_.BeginAttempt(action.epoch);
      break;
    }
    case K::kPublishMarker:
      server_.CompareSet(job::StopKey(action.epoch), "", job::Encode(action.marker));
      break;
    case K::kWatchEpoch:
      WatchEpoch(action.epoch);
      break;
    case K::kLogMissing:
      log_.info("{}", action.text);
      server_.Set(job::kMissingKey, action.text);
      break;
    case K::kLogLost:
      log_.warn("{}", action.text);
      break;
    case K::kFinish:
      missing_timer_.cancel();
      deadline_timer_.cancel();
      heartbeat_timer_.cancel();
      break;
  }
}

}  // namespace gculaunch
