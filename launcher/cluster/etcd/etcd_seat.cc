#include "launcher/cluster/etcd/etcd_seat.h"

#include <boost/asio/post.hpp>
#include <cstdlib>

namespace gculaunch {

namespace asio = boost::asio;

EtcdSeat::EtcdSeat(EtcdMember& member, EtcdSeatSettings settings, spdlog::logger& log)
    : member_(member),
      settings_(std::move(settings)),
      log_(log),
      leader_key_(member, member.prefix() + kEtcdLeaderKey),
      timer_(member.io()),
      retry_timer_(member.io()) {}

EtcdSeat::~EtcdSeat() {
  if (lease_listener_ != 0) member_.RemoveLeaseListener(lease_listener_);
  leader_key_.Stop();
  coordinator_.reset();
  board_.reset();
  if (store_) store_->Stop();
}

void EtcdSeat::Start() {
  lease_listener_ = member_.AddLeaseListener(lifetime_.Wrap([this](const std::string& what) {
    Depose(what);  // its leader key went with the lease
  }));
  leader_key_.OnChange(lifetime_.Wrap(
      [this](const etcd::Event& /*event*/, const std::string& /*key*/) { Watched(); }));
  leader_key_.OnBroken(lifetime_.Wrap([this](const std::string& what) {
    log_.warn("the watch on the job's leader key in etcd failed ({}); watching again", what);
    WatchLeaderKey();
  }));
  WatchLeaderKey();
}

// Lists P/leader and watches it; etcd unreachable: again a second later.
void EtcdSeat::WatchLeaderKey() {
  leader_key_.Start(lifetime_.Wrap([this](const Status& ready) {
    if (ready.ok()) {
      Watched();
      return;
    }
    log_.warn("cannot watch the job's leader key in etcd: {}", ready.error().what);
    retry_timer_.expires_after(std::chrono::seconds(1));
    retry_timer_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec) {
      if (!ec) WatchLeaderKey();
    }));
  }));
}

// P/leader changed: a leader checks it still holds it; the others campaign when it is gone.
void EtcdSeat::Watched() {
  if (finished_ || finishing_) return;
  const etcd::KeyValue* key = leader_key_.Find("");
  if (key != nullptr) {
    if (auto info = DecodeLeader(key->value)) seen_term_ = std::max(seen_term_, info->term);
  }
  if (leader()) {
    if (key == nullptr || key->create_revision != guard_) {
      Depose(key == nullptr ? "its leader key was deleted" : "another node holds the leader key");
    }
    return;
  }
  if (key == nullptr && !campaigning_ && !stopped_) Campaign();
}

// One create-only transaction: the leader key missing, and P/term as read.
void EtcdSeat::Campaign() {
  if (member_.lease() == 0) {  // no lease (etcd unreachable): try again later
    retry_timer_.expires_after(std::chrono::milliseconds(200));
    retry_timer_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec) {
      if (!ec) Watched();
    }));
    return;
  }
  campaigning_ = true;
  const std::string term_key = member_.prefix() + kEtcdTermKey;
  member_.Get(term_key, lifetime_.Wrap([this, term_key](Result<etcd::RangeResponse> read) {
    if (!read.ok()) {
      campaigning_ = false;
      log_.warn("cannot read {} from etcd: {}", term_key, read.error().what);
      retry_timer_.expires_after(std::chrono::milliseconds(200));
      retry_timer_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec) {
        if (!ec) Watched();
      }));
      return;
    }
    const bool exists = !read->kvs.empty();
    const int term = exists ? std::atoi(read->kvs[0].value.c_str()) : 0;
    if (!exists && seen_term_ > 0) {  // the leader removed the job's keys: it is over
      campaigning_ = false;
      finished_ = true;
      return;
    }
    const std::string leader = member_.prefix() + kEtcdLeaderKey;
    LeaderInfo me{term + 1, member_.identity().host, member_.identity().pid,
                  member_.identity().incarnation};
    etcd::TxnRequest txn;
    txn.compare.push_back(etcd::Compare::Missing(leader));
    txn.compare.push_back(exists ? etcd::Compare::ModifiedAt(term_key, read->kvs[0].mod_revision)
                                 : etcd::Compare::Missing(term_key));
    txn.success.push_back(etcd::RequestOp::Put(leader, EncodeLeader(me), member_.lease()));
    txn.success.push_back(etcd::RequestOp::Put(term_key, std::to_string(term + 1)));
    member_.RunTxn(std::move(txn), lifetime_.Wrap([this, term](Result<etcd::TxnResponse> won) {
      campaigning_ = false;
      if (won.ok() && won->succeeded) {
        Won(term + 1, won->revision);
        return;
      }
      Watched();  // lost: someone else leads, or P/term moved under us (try again)
    }));
  }));
}

void EtcdSeat::Won(int term, std::int64_t guard) {
  term_ = term;
  guard_ = guard;
  seen_term_ = std::max(seen_term_, term);
  auto socket = rendezvous::ListenSocket::Bind(settings_.ranks_host, settings_.ranks_port);
  if (!socket.ok()) {
    log_.error("this node leads the job (term {}) but cannot serve the ranks' store: {}", term,
               socket.error().what);
    Depose("the ranks' store could not be bound");
    return;
  }
  log_.info("this node leads the job on etcd (term {}); the ranks' store is on port {}", term,
            socket->port());
  store_ = std::make_unique<AgentStore>(member_.io(), std::move(*socket), log_);
  board_ = std::make_unique<EtcdCoordinatorBoard>(member_, term, guard, *store_);
  board_->OnDeposed(lifetime_.Wrap([this](const std::string& what) { Depose(what); }));
  board_->Start(lifetime_.Wrap([this, term](const Status& ready) {
    if (term != term_ || !leader()) return;
    if (!ready.ok()) {
      Depose("cannot read the term's keys: " + ready.error().what);
      return;
    }
    CoordinatorSettings s = settings_.coordinator;
    s.config.node0.node_rank = 0;
    s.ranks_port = store_->server().port();
    coordinator_ = std::make_unique<Coordinator>(member_.io(), *board_, s, log_);
    coordinator_->Start();
    ArmFinishCheck();
  }));
}

// Posted: the board that reports it must not be destroyed inside its own callback.  A leader
// key that is still this seat's is deleted (resigning), so that another process can win.
void EtcdSeat::Depose(const std::string& what) {
  if (!leader() || finishing_) return;
  log_.warn("this node no longer leads the job (term {}): {}", term_, what);
  const std::string leader = member_.prefix() + kEtcdLeaderKey;
  etcd::TxnRequest resign;
  resign.compare.push_back(etcd::Compare::CreatedAt(leader, guard_));
  resign.success.push_back(etcd::RequestOp::Delete(leader));
  member_.RunTxn(std::move(resign), [](const Result<etcd::TxnResponse>&) {});
  guard_ = 0;
  timer_.cancel();
  asio::post(member_.io(), lifetime_.Wrap([this] {
    coordinator_.reset();
    board_.reset();
    if (store_) store_->Stop();
    store_.reset();
    Watched();
  }));
}

void EtcdSeat::ArmFinishCheck() {
  timer_.expires_after(settings_.finish_check);
  timer_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec) {
    if (ec || !leader() || !coordinator_) return;
    if (coordinator_->finished()) {
      Finish();
      return;
    }
    ArmFinishCheck();
  }));
}

// Every node said bye or is away: the job's keys go, while this node still leads.
void EtcdSeat::Finish() {
  finishing_ = true;
  etcd::TxnRequest txn;
  txn.compare.push_back(etcd::Compare::CreatedAt(member_.prefix() + kEtcdLeaderKey, guard_));
  txn.success.push_back(etcd::RequestOp::DeletePrefix(member_.prefix()));
  member_.RunTxn(std::move(txn), lifetime_.Wrap([this](const Result<etcd::TxnResponse>& done) {
    if (!done.ok() || !done->succeeded) {
      log_.warn("could not remove the job's keys under {} from etcd: {}", member_.prefix(),
                done.ok() ? "this node no longer leads" : done.error().what);
    }
    finished_ = true;
  }));
}

}  // namespace gculaunch
