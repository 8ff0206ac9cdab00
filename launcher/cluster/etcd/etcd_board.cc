#include "launcher/cluster/etcd/etcd_board.h"

#include <boost/asio/post.hpp>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>

#include "launcher/cluster/job_protocol.h"

namespace gculaunch {

namespace asio = boost::asio;

std::string EncodeLeader(const LeaderInfo& leader) {
  return nlohmann::json{{"term", leader.term},
                        {"host", leader.host},
                        {"pid", leader.pid},
                        {"incarnation", leader.incarnation}}
      .dump();
}

std::optional<LeaderInfo> DecodeLeader(const std::string& text) {
  auto doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("term") ||
      !doc["term"].is_number_integer()) {
    return std::nullopt;
  }
  LeaderInfo leader;
  leader.term = doc["term"].get<int>();
  leader.host = doc.value("host", "");
  leader.pid = doc.value("pid", 0);
  leader.incarnation = doc.value("incarnation", "");
  return leader;
}

std::string TermPrefix(const std::string& prefix, int term) {
  return prefix + "t/" + std::to_string(term) + "/";
}

namespace {

std::string LeaderName(const LeaderInfo& leader) {
  return "the leader of term " + std::to_string(leader.term) + " (" + leader.host + ", pid " +
         std::to_string(leader.pid) + ")";
}

}  // namespace

// ----------------------------------- EtcdAgentBoard -----------------------------------

EtcdAgentBoard::EtcdAgentBoard(EtcdMember& member, std::string local_address)
    : member_(member),
      local_address_(std::move(local_address)),
      leader_(member, member.prefix() + kEtcdLeaderKey) {}

EtcdAgentBoard::~EtcdAgentBoard() {
  if (lease_listener_ != 0) member_.RemoveLeaseListener(lease_listener_);
}

// Waits (up to `deadline`) for a leader, then follows its term's keys.  etcd out of reach is
// retried with back-off: the deadline's error then names etcd's last error.
void EtcdAgentBoard::Connect(bool /*rejoin*/, std::chrono::milliseconds deadline, Done done) {
  auto once = std::make_shared<Done>(std::move(done));
  auto last_error = std::make_shared<std::string>();
  connect_timer_ = std::make_unique<asio::steady_timer>(member_.io());
  retry_timer_ = std::make_unique<asio::steady_timer>(member_.io());
  connect_timer_->expires_after(deadline);
  connect_timer_->async_wait(
      lifetime_.Wrap([this, once, last_error](const boost::system::error_code& ec) {
        if (ec || !*once) return;
        auto d = std::move(*once);
        *once = nullptr;
        retry_timer_->cancel();
        if (!last_error->empty()) {
          d(Error{"could not reach etcd for the job's keys under " + member_.prefix() + ": " +
                      *last_error,
                  "check that etcd runs at --rdzv-endpoint and that this node reaches it"});
          return;
        }
        d(Error{"no leader of the job appeared in etcd under " + member_.prefix() + kEtcdLeaderKey,
                "start the job's other nodes, or check --rdzv-endpoint and --rdzv-id"});
      }));
  TryConnect(once, last_error, std::chrono::milliseconds(100));
}

void EtcdAgentBoard::TryConnect(const std::shared_ptr<Done>& once,
                                const std::shared_ptr<std::string>& last_error,
                                std::chrono::milliseconds backoff) {
  auto retry = [this, once, last_error, backoff](const Status& failed) {
    if (!*once) return;
    *last_error = failed.error().what;
    retry_timer_->expires_after(backoff);
    retry_timer_->async_wait(
        lifetime_.Wrap([this, once, last_error, backoff](const boost::system::error_code& ec) {
          if (ec || !*once) return;
          TryConnect(once, last_error, std::min(backoff * 2, std::chrono::milliseconds(1000)));
        }));
  };
  auto follow = [this, once, retry](const Status& ready) {
    if (!*once) return;
    if (!ready.ok()) {
      leader_started_ = false;  // the next attempt lists again
      retry(ready);
      return;
    }
    leader_.WaitKey("", lifetime_.Wrap([this, once, retry](const std::string& text) {
      if (!*once) return;
      if (!DecodeLeader(text)) {
        auto d = std::move(*once);
        *once = nullptr;
        connect_timer_->cancel();
        d(Error{"etcd's " + member_.prefix() + kEtcdLeaderKey + " is not a gculaunch leader key",
                "use a --rdzv-id of its own for every job"});
        return;
      }
      Follow([this, once, retry](const Status& s) {
        if (!*once) return;
        if (!s.ok()) {  // the term's keys could not be listed: etcd went away meanwhile
          retry(s);
          return;
        }
        auto d = std::move(*once);
        *once = nullptr;
        connect_timer_->cancel();
        retry_timer_->cancel();
        d(s);
      });
    }));
  };
  if (leader_started_) {
    follow(OkStatus());
    return;
  }
  leader_started_ = true;
  leader_.OnChange(lifetime_.Wrap(
      [this](const etcd::Event& /*event*/, const std::string& /*key*/) { LeaderChanged(); }));
  leader_.OnBroken(lifetime_.Wrap([this](std::string what) {
    leader_started_ = false;  // the next Connect lists again
    Lose("the watch on the job's leader key in etcd failed: " + std::move(what));
  }));
  leader_.Start(lifetime_.Wrap(follow));
}

// The leader's term becomes this board's.
void EtcdAgentBoard::Follow(Done done) {
  auto text = leader_.Get("");
  auto leader = text ? DecodeLeader(*text) : std::nullopt;
  if (!leader) {
    done(Error{"etcd's " + member_.prefix() + kEtcdLeaderKey + " is not a gculaunch leader key",
               "use a --rdzv-id of its own for every job"});
    return;
  }
  followed_ = *leader;
  if (leader->term == term_ && keys_) {
    asio::post(member_.io(), [done = std::move(done)] { done(OkStatus()); });
    return;
  }
  term_ = leader->term;
  keys_ = std::make_unique<EtcdMirror>(member_, TermPrefix(member_.prefix(), term_));
  keys_->Start(lifetime_.Wrap([this, done = std::move(done)](const Status& listed) {
    if (!listed.ok()) keys_.reset();  // the next Follow lists the term again
    done(listed);
  }));
}

void EtcdAgentBoard::LeaderChanged() {
  if (!on_lost_) return;
  auto text = leader_.Get("");
  if (!text) {
    Lose(LeaderName(followed_) + " went away: its etcd key " + member_.prefix() + kEtcdLeaderKey +
         " was deleted (its lease ended)");
    return;
  }
  auto leader = DecodeLeader(*text);
  if (!leader || leader->term != term_) {
    Lose(LeaderName(followed_) + " was replaced by " +
         (leader ? LeaderName(*leader) : std::string("an unreadable leader key")));
  }
}

void EtcdAgentBoard::Lose(std::string what) {
  if (!on_lost_) return;
  auto lost = std::move(on_lost_);
  on_lost_ = nullptr;
  asio::post(member_.io(),
             lifetime_.Wrap([lost = std::move(lost), what = std::move(what)] { lost(what); }));
}

void EtcdAgentBoard::TakeId(Seq done) {
  if (followed_.incarnation == member_.identity().incarnation) {  // this node leads the term
    node_ = 0;
    asio::post(member_.io(), [done = std::move(done)] { done(0); });
    return;
  }
  member_.Increment(Key(job::kNodeIdKey), nullptr,
                    lifetime_.Wrap([this, done = std::move(done)](Result<int> id) {
                      if (id.ok()) node_ = *id;
                      done(std::move(id));
                    }));
}

void EtcdAgentBoard::Join(const std::string& registration, Seq done) {
  const int node = node_;
  const std::string prefix = TermPrefix(member_.prefix(), term_);
  member_.Increment(
      Key(job::JoinSeqKey(node)),
      [node, prefix, registration](int seq) {
        return std::vector<etcd::RequestOp>{
            etcd::RequestOp::Put(prefix + job::JoinKey(node, seq), registration)};
      },
      lifetime_.Wrap(std::move(done)));
}

void EtcdAgentBoard::Beat(int seq, std::function<void(std::string)> on_lost) {
  on_lost_ = std::move(on_lost);
  if (lease_listener_ == 0) {
    lease_listener_ = member_.AddLeaseListener(
        lifetime_.Wrap([this](std::string what) { Lose(std::move(what)); }));
  }
  member_.Put(Key(job::HeartbeatKey(node_, seq)), "1", true,
              lifetime_.Wrap([this](const Status& s) {
                if (!s.ok())
                  Lose("this node's heartbeat could not be written to etcd: " + s.error().what);
              }));
  LeaderChanged();  // the leader may have gone while this node joined
}

void EtcdAgentBoard::Quiet() { on_lost_ = nullptr; }

void EtcdAgentBoard::WaitAdmission(int seq, Text done) {
  keys_->WaitKey(job::AdmitKey(node_, seq), std::move(done));
}

void EtcdAgentBoard::WaitPlan(int epoch, bool own, Text done) {
  keys_->WaitKey(own ? job::NodePlanKey(epoch, node_) : job::PlanKey(epoch), std::move(done));
}

void EtcdAgentBoard::WaitMarker(int epoch, Text done) {
  keys_->WaitKey(job::StopKey(epoch), std::move(done));
}

void EtcdAgentBoard::PublishMarker(int epoch, const std::string& marker, Text done) {
  const std::string key = Key(job::StopKey(epoch));
  etcd::TxnRequest txn;
  txn.compare.push_back(etcd::Compare::Missing(key));
  txn.success.push_back(etcd::RequestOp::Put(key, marker));
  txn.failure.push_back(etcd::RequestOp::Get(key));
  member_.RunTxn(std::move(txn), [marker, done = std::move(done)](Result<etcd::TxnResponse> r) {
    if (!r.ok()) {
      done(r.error());
    } else if (r->succeeded || r->responses.empty() || r->responses[0].range.kvs.empty()) {
      done(marker);
    } else {
      done(r->responses[0].range.kvs[0].value);
    }
  });
}

void EtcdAgentBoard::Write(const std::string& key, const std::string& value, Done done) {
  member_.Put(Key(key), value, false, std::move(done));
}

void EtcdAgentBoard::Read(const std::string& key, Text done) {
  std::string value = keys_ ? keys_->Get(key).value_or("") : "";
  asio::post(member_.io(), [value = std::move(value), done = std::move(done)] { done(value); });
}

void EtcdAgentBoard::ReportDone(int epoch, Done done) {
  Write(job::DoneKey(epoch, node_), "1", std::move(done));
}

void EtcdAgentBoard::ReportReaped(int epoch, const std::string& report, Done done) {
  Write(job::ReapedKey(epoch, node_), report, std::move(done));
}

void EtcdAgentBoard::SayBye(int seq, int exit_code, Done done) {
  Write(job::ByeKey(node_, seq), std::to_string(exit_code), std::move(done));
}

void EtcdAgentBoard::ReadMissing(Text done) { Read(job::kMissingKey, std::move(done)); }

void EtcdAgentBoard::ReadJobInfo(Text done) { Read(job::kInfoKey, std::move(done)); }

void EtcdAgentBoard::ReadDumpRequest(Seq done) {
  Read(job::kDumpRequestKey,
       [done = std::move(done)](const Result<std::string>& n) { done(std::atoi(n->c_str())); });
}

void EtcdAgentBoard::PublishDump(int request, const std::string& stacks, Done done) {
  Write(job::DumpKey(request, node_), stacks, std::move(done));
}

void EtcdAgentBoard::PublishProgress(const std::string& report, Done done) {
  Write(job::ProgressKey(node_), report, std::move(done));
}

void EtcdAgentBoard::Close() {
  on_lost_ = nullptr;
  leader_.Stop();
  if (keys_) keys_->Stop();
  if (connect_timer_) connect_timer_->cancel();
}

// -------------------------------- EtcdCoordinatorBoard --------------------------------

EtcdCoordinatorBoard::EtcdCoordinatorBoard(EtcdMember& member, int term, std::int64_t guard,
                                           AttemptObserver& attempts)
    : member_(member),
      term_(term),
      guard_(guard),
      attempts_(attempts),
      keys_(member, TermPrefix(member.prefix(), term)),
      retry_timer_(member.io()) {}

EtcdCoordinatorBoard::~EtcdCoordinatorBoard() { keys_.Stop(); }

void EtcdCoordinatorBoard::Start(std::function<void(Status)> ready) {
  keys_.OnChange(lifetime_.Wrap(
      [this](const etcd::Event& event, const std::string& key) { Changed(event, key); }));
  keys_.OnBroken(lifetime_.Wrap(
      [this](std::string what) { Deposed("the watch on etcd failed: " + std::move(what)); }));
  keys_.Start(lifetime_.Wrap(std::move(ready)));
}

void EtcdCoordinatorBoard::OnDeposed(std::function<void(std::string)> deposed) {
  on_deposed_ = std::move(deposed);
}

// A heartbeat key deleted is a hang-up: its node's lease ended (killed, or cut off from etcd).
void EtcdCoordinatorBoard::Changed(const etcd::Event& event, const std::string& key) {
  static constexpr std::string_view kBeat = "job/hb/";
  if (event.type != etcd::Event::Type::kDelete || !key.starts_with(kBeat) || !hung_up_) return;
  const std::string rest = key.substr(kBeat.size());
  const auto slash = rest.find('/');
  if (slash == std::string::npos) return;
  hung_up_(std::atoi(rest.c_str()), std::atoi(rest.c_str() + slash + 1),
           "its etcd lease ended without a bye (killed, or cut off from etcd)");
}

void EtcdCoordinatorBoard::Write(etcd::RequestOp op, bool only_if_missing) {
  if (deposed_) return;
  etcd::TxnRequest txn;
  const std::string leader = member_.prefix() + kEtcdLeaderKey;
  txn.compare.push_back(etcd::Compare::CreatedAt(leader, guard_));
  if (only_if_missing) txn.compare.push_back(etcd::Compare::Missing(op.key));
  txn.success.push_back(std::move(op));
  txn.failure.push_back(etcd::RequestOp::Get(leader));
  writes_.push_back(std::move(txn));
  Pump();
}

// One write at a time, in the order the coordinator made them.
void EtcdCoordinatorBoard::Pump() {
  if (writing_ || writes_.empty() || deposed_) return;
  writing_ = true;
  etcd::TxnRequest txn = writes_.front();
  writes_.pop_front();
  member_.RunTxn(txn, lifetime_.Wrap([this, txn](Result<etcd::TxnResponse> r) {
    writing_ = false;
    if (!r.ok() && retries_ < kWriteRetries) {
      // etcd did not answer: the same write again (guarded puts and deletes are idempotent;
      // a marker that did get written fails its own compare, which is fine).
      ++retries_;
      writes_.push_front(txn);
      retry_timer_.expires_after(std::chrono::milliseconds(300));
      retry_timer_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec) {
        if (!ec) Pump();
      }));
      return;
    }
    if (!r.ok()) {
      Deposed("etcd did not take a write " + std::to_string(kWriteRetries + 1) +
              " times: " + r.error().what);
      return;
    }
    retries_ = 0;
    if (!r->succeeded) {
      const auto& kvs =
          r->responses.empty() ? std::vector<etcd::KeyValue>{} : r->responses[0].range.kvs;
      if (kvs.empty() || kvs[0].create_revision != guard_) {
        Deposed("its leader key " + member_.prefix() + kEtcdLeaderKey +
                (kvs.empty() ? " is gone" : " belongs to another term now"));
        return;
      }  // else: the key existed already (a marker: first writer wins)
    }
    Pump();
  }));
}

void EtcdCoordinatorBoard::Deposed(std::string what) {
  if (deposed_) return;
  deposed_ = true;
  writes_.clear();
  if (on_deposed_) {
    asio::post(member_.io(), lifetime_.Wrap([this, what = std::move(what)] {
      if (on_deposed_) on_deposed_(what);
    }));
  }
}

int EtcdCoordinatorBoard::Number(const std::string& key) const {
  return std::atoi(keys_.Get(key).value_or("0").c_str());
}

void EtcdCoordinatorBoard::WatchJoin(int node, int seq, Text text) {
  keys_.WaitKey(job::JoinKey(node, seq), std::move(text));
}

int EtcdCoordinatorBoard::JoinsNumbered(int node) const { return Number(job::JoinSeqKey(node)); }

int EtcdCoordinatorBoard::IdsTaken() const { return Number(job::kNodeIdKey); }

bool EtcdCoordinatorBoard::JoinExists(int node, int seq) const {
  return keys_.Find(job::JoinKey(node, seq)) != nullptr;
}

void EtcdCoordinatorBoard::Admit(int node, int seq, const std::string& plan) {
  Write(etcd::RequestOp::Put(Key(job::AdmitKey(node, seq)), plan), false);
}

void EtcdCoordinatorBoard::PublishPlan(int epoch, const std::string& plan) {
  Write(etcd::RequestOp::Put(Key(job::PlanKey(epoch)), plan), false);
}

void EtcdCoordinatorBoard::PublishNodePlan(int epoch, int node, const std::string& plan) {
  Write(etcd::RequestOp::Put(Key(job::NodePlanKey(epoch, node)), plan), false);
}

void EtcdCoordinatorBoard::ForgetNodePlan(int epoch, int node) {
  Write(etcd::RequestOp::Delete(Key(job::NodePlanKey(epoch, node))), false);
}

void EtcdCoordinatorBoard::PublishMarker(int epoch, const std::string& marker) {
  Write(etcd::RequestOp::Put(Key(job::StopKey(epoch)), marker), true);
}

void EtcdCoordinatorBoard::WatchMarker(int epoch, Text text) {
  keys_.WaitKey(job::StopKey(epoch), std::move(text));
}

void EtcdCoordinatorBoard::WatchDone(int epoch, int node, Fired fired) {
  keys_.WaitKey(job::DoneKey(epoch, node),
                [fired = std::move(fired)](const std::string&) { fired(); });
}

void EtcdCoordinatorBoard::WatchReaped(int epoch, int node, Text report) {
  keys_.WaitKey(job::ReapedKey(epoch, node),
                [report = std::move(report)](const std::string& value) { report(value); });
}

void EtcdCoordinatorBoard::WatchBye(int node, int seq, std::function<void(int)> exit_code) {
  keys_.WaitKey(job::ByeKey(node, seq), [exit_code = std::move(exit_code)](const std::string& v) {
    exit_code(std::atoi(v.c_str()));
  });
}

bool EtcdCoordinatorBoard::SaidBye(int node, int seq) const {
  return keys_.Find(job::ByeKey(node, seq)) != nullptr;
}

std::string EtcdCoordinatorBoard::Heartbeat(int node, int seq) const {
  std::string& last = beats_[{node, seq}];
  if (keys_.Find(job::HeartbeatKey(node, seq)) != nullptr) {
    last = "alive " + std::to_string(++beat_calls_);
  }
  return last;
}

void EtcdCoordinatorBoard::SetMissing(const std::string& text) {
  Write(etcd::RequestOp::Put(Key(job::kMissingKey), text), false);
}

void EtcdCoordinatorBoard::PublishJobInfo(const std::string& registration) {
  Write(etcd::RequestOp::Put(Key(job::kInfoKey), registration), false);
}

void EtcdCoordinatorBoard::BeginAttempt(int epoch) { attempts_.BeginAttempt(epoch); }

void EtcdCoordinatorBoard::OnHangUp(HungUp hung_up) { hung_up_ = std::move(hung_up); }

// Only the term's leader writes job/dumpreq (the guard), so a local count is the counter.
int EtcdCoordinatorBoard::RequestDump() {
  dump_requests_ = std::max(dump_requests_, Number(job::kDumpRequestKey)) + 1;
  Write(etcd::RequestOp::Put(Key(job::kDumpRequestKey), std::to_string(dump_requests_)), false);
  return dump_requests_;
}

std::optional<std::string> EtcdCoordinatorBoard::DumpAnswer(int request, int node) const {
  return keys_.Get(job::DumpKey(request, node));
}

void EtcdCoordinatorBoard::ForgetDump(int request, int node) {
  Write(etcd::RequestOp::Delete(Key(job::DumpKey(request, node))), false);
}

std::optional<std::string> EtcdCoordinatorBoard::ProgressReport(int node) const {
  return keys_.Get(job::ProgressKey(node));
}

}  // namespace gculaunch
