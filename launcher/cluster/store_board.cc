#include "launcher/cluster/store_board.h"

#include <cstdlib>
#include <string_view>

#include "base/text.h"
#include "launcher/cluster/job_protocol.h"

namespace gculaunch {

// ----------------------------------- StoreAgentBoard -----------------------------------

StoreAgentBoard::StoreAgentBoard(AgentLink& link, RemoteAgentLink* remote, int node)
    : link_(link), remote_(remote), node_(node) {}

void StoreAgentBoard::Connect(bool rejoin, std::chrono::milliseconds deadline, Done done) {
  if (remote_ == nullptr) {  // node 0: the store is this process
    link_.Get(job::kMissingKey,
              [done = std::move(done)](const Result<std::string>&) { done(OkStatus()); });
    return;
  }
  if (rejoin) remote_->Reset(deadline);
  remote_->Connect(std::move(done));
}

std::string StoreAgentBoard::LocalAddress() const {
  return remote_ != nullptr ? remote_->local_address() : "";
}

void StoreAgentBoard::TakeId(Seq done) {
  link_.Add(job::kNodeIdKey, 1, [this, done = std::move(done)](Result<std::string> n) {
    if (!n.ok()) {
      done(n.error());
      return;
    }
    node_ = std::atoi(n->c_str());
    done(node_);
  });
}

void StoreAgentBoard::Join(const std::string& registration, Seq done) {
  link_.Add(job::JoinSeqKey(node_), 1,
            [this, registration, done = std::move(done)](Result<std::string> n) {
              if (!n.ok()) {
                done(n.error());
                return;
              }
              const int seq = std::atoi(n->c_str());
              link_.Set(job::JoinKey(node_, seq), registration, [seq, done](const Status& s) {
                if (!s.ok()) {
                  done(s.error());
                  return;
                }
                done(seq);
              });
            });
}

void StoreAgentBoard::Beat(int seq, std::function<void(std::string)> on_lost) {
  // Each beat also reads node 0's dump request counter (ReadDumpRequest).
  if (remote_ != nullptr) {
    remote_->StartHeartbeat(job::HeartbeatKey(node_, seq), std::move(on_lost),
                            job::kDumpRequestKey);
  }
}

void StoreAgentBoard::Quiet() {
  if (remote_ != nullptr) remote_->StopHeartbeat();
}

void StoreAgentBoard::WaitAdmission(int seq, Text done) {
  link_.WaitGet(job::AdmitKey(node_, seq), std::move(done));
}

void StoreAgentBoard::WaitPlan(int epoch, bool own, Text done) {
  link_.WaitGet(own ? job::NodePlanKey(epoch, node_) : job::PlanKey(epoch), std::move(done));
}

void StoreAgentBoard::WaitMarker(int epoch, Text done) {
  link_.WaitGet(job::StopKey(epoch), std::move(done));
}

void StoreAgentBoard::PublishMarker(int epoch, const std::string& marker, Text done) {
  link_.CompareSet(job::StopKey(epoch), "", marker, std::move(done));
}

void StoreAgentBoard::ReportDone(int epoch, Done done) {
  link_.Set(job::DoneKey(epoch, node_), "1", std::move(done));
}

void StoreAgentBoard::ReportReaped(int epoch, const std::string& report, Done done) {
  link_.Set(job::ReapedKey(epoch, node_), report, std::move(done));
}

void StoreAgentBoard::SayBye(int seq, int exit_code, Done done) {
  link_.Set(job::ByeKey(node_, seq), std::to_string(exit_code), std::move(done));
}

void StoreAgentBoard::ReadMissing(Text done) { link_.Get(job::kMissingKey, std::move(done)); }

void StoreAgentBoard::ReadJobInfo(Text done) { link_.Get(job::kInfoKey, std::move(done)); }

// What the latest heartbeat read, when it is fresh (two beats' time): a node's poll of the
// dump requests costs node 0 nothing of its own.  Else (no beat yet, or a busy control
// connection that did not beat) one GET.
void StoreAgentBoard::ReadDumpRequest(Seq done) {
  auto number = [done = std::move(done)](const Result<std::string>& n) {
    if (!n.ok()) {
      done(n.error());
      return;
    }
    done(std::atoi(n->c_str()));
  };
  if (remote_ != nullptr && remote_->ReadAtBeat(number)) return;
  link_.Get(job::kDumpRequestKey, std::move(number));
}

void StoreAgentBoard::PublishDump(int request, const std::string& stacks, Done done) {
  link_.Set(job::DumpKey(request, node_), stacks, std::move(done));
}

void StoreAgentBoard::PublishProgress(const std::string& report, Done done) {
  link_.Set(job::ProgressKey(node_), report, std::move(done));
}

void StoreAgentBoard::Close() { link_.Close(); }

// -------------------------------- StoreCoordinatorBoard --------------------------------

StoreCoordinatorBoard::StoreCoordinatorBoard(rendezvous::Server& server, AttemptObserver& attempts,
                                             int nnodes, rendezvous::TcpKeepAlive keepalive)
    : server_(server), attempts_(attempts), nnodes_(nnodes), keepalive_(keepalive) {}

void StoreCoordinatorBoard::WaitKey(const std::string& key, std::function<void(bool)> done) {
  server_.AsyncWait({key}, lifetime_.Wrap(std::move(done)));
}

void StoreCoordinatorBoard::WatchJoin(int node, int seq, Text text) {
  const std::string key = job::JoinKey(node, seq);
  WaitKey(key, [this, key, text = std::move(text)](bool ok) {
    if (!ok) {
      text(Error{"the store stopped", ""});
      return;
    }
    text(server_.Get(key).value_or(""));
  });
}

int StoreCoordinatorBoard::JoinsNumbered(int node) const {
  return std::atoi(server_.Get(job::JoinSeqKey(node)).value_or("0").c_str());
}

int StoreCoordinatorBoard::IdsTaken() const {
  return std::atoi(server_.Get(job::kNodeIdKey).value_or("0").c_str());
}

bool StoreCoordinatorBoard::JoinExists(int node, int seq) const {
  return server_.Get(job::JoinKey(node, seq)).has_value();
}

void StoreCoordinatorBoard::Admit(int node, int seq, const std::string& plan) {
  server_.Set(job::AdmitKey(node, seq), plan);
}

void StoreCoordinatorBoard::PublishPlan(int epoch, const std::string& plan) {
  server_.Set(job::PlanKey(epoch), plan);
}

void StoreCoordinatorBoard::PublishNodePlan(int epoch, int node, const std::string& plan) {
  server_.Set(job::NodePlanKey(epoch, node), plan);
}

void StoreCoordinatorBoard::ForgetNodePlan(int epoch, int node) {
  server_.DeleteKey(job::NodePlanKey(epoch, node));
}

void StoreCoordinatorBoard::PublishMarker(int epoch, const std::string& marker) {
  server_.CompareSet(job::StopKey(epoch), "", marker);
}

void StoreCoordinatorBoard::WatchMarker(int epoch, Text text) {
  const std::string key = job::StopKey(epoch);
  WaitKey(key, [this, key, text = std::move(text)](bool ok) {
    if (ok) text(server_.Get(key).value_or(""));
  });
}

void StoreCoordinatorBoard::WatchDone(int epoch, int node, Fired fired) {
  WaitKey(job::DoneKey(epoch, node), [fired = std::move(fired)](bool ok) {
    if (ok) fired();
  });
}

void StoreCoordinatorBoard::WatchReaped(int epoch, int node, Text report) {
  const std::string key = job::ReapedKey(epoch, node);
  WaitKey(key, [this, key, report = std::move(report)](bool ok) {
    if (ok) report(server_.Get(key).value_or(""));
  });
}

void StoreCoordinatorBoard::WatchBye(int node, int seq, std::function<void(int)> exit_code) {
  const std::string key = job::ByeKey(node, seq);
  WaitKey(key, [this, key, exit_code = std::move(exit_code)](bool ok) {
    if (ok) exit_code(std::atoi(server_.Get(key).value_or("0").c_str()));
  });
}

bool StoreCoordinatorBoard::SaidBye(int node, int seq) const {
  return server_.Get(job::ByeKey(node, seq)).has_value();
}

std::string StoreCoordinatorBoard::Heartbeat(int node, int seq) const {
  auto heard = heard_.find(JoinId(node, seq));
  return heard == heard_.end() ? "" : std::to_string(heard->second);
}

void StoreCoordinatorBoard::SetMissing(const std::string& text) {
  server_.Set(job::kMissingKey, text);
}

void StoreCoordinatorBoard::PublishJobInfo(const std::string& registration) {
  server_.Set(job::kInfoKey, registration);
}

void StoreCoordinatorBoard::BeginAttempt(int epoch) { attempts_.BeginAttempt(epoch); }

void StoreCoordinatorBoard::OnHangUp(HungUp hung_up) { hung_up_ = std::move(hung_up); }

int StoreCoordinatorBoard::RequestDump() {
  auto n = server_.Add(job::kDumpRequestKey, 1);
  return n.ok() ? static_cast<int>(*n) : 0;
}

std::optional<std::string> StoreCoordinatorBoard::DumpAnswer(int request, int node) const {
  return server_.Get(job::DumpKey(request, node));
}

void StoreCoordinatorBoard::ForgetDump(int request, int node) {
  server_.DeleteKey(job::DumpKey(request, node));
}

std::optional<std::string> StoreCoordinatorBoard::ProgressReport(int node) const {
  return server_.Get(job::ProgressKey(node));
}

void StoreCoordinatorBoard::OnRequest(rendezvous::ConnId id, const rendezvous::Request& request) {
  if (auto known = beaters_.find(id); known != beaters_.end()) {
    // Slow is not dead: whatever the node sends (a report, a progress line, a heartbeat that
    // queued behind them) shows that it runs.
    ++*known->second.heard;
    return;
  }
  // Only a node that joined heartbeats; "gculaunch/job/hb/<node>/<seq>" names its control
  // connection.
  static constexpr std::string_view kBeat = "gculaunch/job/hb/";
  if (request.op != rendezvous::Op::kAdd || request.keys.size() != 1) return;
  const std::string& key = request.keys[0];
  if (!key.starts_with(kBeat)) return;
  const std::string rest = key.substr(kBeat.size());
  const auto slash = rest.find('/');
  if (slash == std::string::npos) return;
  const int node = std::atoi(rest.c_str());
  const int seq = std::atoi(rest.c_str() + slash + 1);
  if (node <= 0 || node >= nnodes_ || seq <= 0) return;
  std::uint64_t& heard = heard_[JoinId(node, seq)];
  ++heard;
  beaters_[id] = Beater{node, seq, &heard};
  // The host vanishing (no FIN, no RST) ends this connection within seconds, like the
  // node's own side: a hang-up, not a silence.
  server_.KeepAlive(id, keepalive_);
}

void StoreCoordinatorBoard::OnConnectionEnd(rendezvous::ConnId id, const std::string& why) {
  auto it = beaters_.find(id);
  if (it == beaters_.end()) return;
  const int node = it->second.node;
  const int seq = it->second.seq;
  beaters_.erase(it);
  if (!hung_up_) return;
  if (why.empty()) {
    hung_up_(node, seq, "its gculaunch closed its connection without a bye (killed?)");
  } else if (why.find("timed out") != std::string::npos) {
    hung_up_(node, seq,
             "its connection timed out: its host stopped acknowledging for " +
                 Seconds(keepalive_.user_timeout, -1) + " (host down, or the network cut)");
  } else {
    hung_up_(node, seq, "its connection broke (" + why + ")");
  }
}

// ----------------------------------- ConnectionHooks -----------------------------------

rendezvous::ServerOptions ConnectionHooks::Options(const std::shared_ptr<ConnectionHooks>& hooks) {
  rendezvous::ServerOptions options;
  if (!hooks) return options;  // no board to feed: a single node, or not the store's host
  options.request_observer = [hooks](rendezvous::ConnId id, const rendezvous::Request& r) {
    if (hooks->target != nullptr) hooks->target->OnRequest(id, r);
  };
  options.connection_observer = [hooks](rendezvous::ConnId id, const std::string& why) {
    if (hooks->target != nullptr) hooks->target->OnConnectionEnd(id, why);
  };
  return options;
}

}  // namespace gculaunch
