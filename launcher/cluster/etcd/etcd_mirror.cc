#include "launcher/cluster/etcd_mirror.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <cstdlib>

// GCC 12 reports a false -Wmismatched-new-delete where Asio's awaitable frames are inlined.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace gculaunch {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

// Runs one request of `client` (made by `make`) and hands its result to `done`.  The
// coroutine holds the client, so the request may outlive its caller; `done` is the caller's
// business (wrap it in a LifetimeGuard).
template <typename T, typename Make>
void Request(asio::io_context& io, std::shared_ptr<etcd::Client> client, Make make,
             std::function<void(Result<T>)> done) {
  asio::co_spawn(
      io,
      [client = std::move(client), make = std::move(make),
       done = std::move(done)]() -> asio::awaitable<void> {
        Result<T> result = co_await make(*client);
        done(std::move(result));
      },
      asio::detached);
}

}  // namespace

// ------------------------------------ EtcdMember ------------------------------------

EtcdMember::EtcdMember(asio::io_context& io, etcd::ClientOptions options, std::string prefix,
                       std::chrono::seconds ttl, EtcdIdentity identity)
    : io_(io),
      client_(std::make_shared<etcd::Client>(io.get_executor(), std::move(options))),
      prefix_(std::move(prefix)),
      ttl_(ttl),
      identity_(std::move(identity)),
      keepalive_timer_(io) {}

EtcdMember::~EtcdMember() { keepalive_timer_.cancel(); }

void EtcdMember::Start(Done ready) { Grant(std::move(ready)); }

void EtcdMember::Grant(Done ready) {
  const std::int64_t ttl = ttl_.count();
  Request<etcd::Lease>(
      io_, client_, [ttl](etcd::Client& c) { return c.LeaseGrant(ttl); },
      lifetime_.Wrap([this, ready = std::move(ready)](Result<etcd::Lease> lease) {
        if (lease.ok()) {
          lease_ = lease->id;
          last_alive_ = Clock::now();
        }
        ArmKeepAlive();
        if (ready) ready(lease.ok() ? OkStatus() : Status(lease.error()));
      }));
}

void EtcdMember::ArmKeepAlive() {
  if (revoked_) return;
  keepalive_timer_.expires_after(std::chrono::duration_cast<std::chrono::milliseconds>(ttl_) / 3);
  keepalive_timer_.async_wait(lifetime_.Wrap([this](const boost::system::error_code& ec) {
    if (!ec) KeepAlive();
  }));
}

void EtcdMember::KeepAlive() {
  if (lease_ == 0) {  // lost before: a fresh lease
    Grant(nullptr);
    return;
  }
  const std::int64_t id = lease_;
  Request<etcd::KeepAliveResponse>(
      io_, client_, [id](etcd::Client& c) { return c.LeaseKeepAlive(id); },
      lifetime_.Wrap([this, id](Result<etcd::KeepAliveResponse> alive) {
        if (revoked_ || id != lease_) return;
        if (alive.ok() && !alive->expired) {
          last_alive_ = Clock::now();
        } else if (alive.ok()) {
          Lost("this process's etcd lease " + std::to_string(id) + " expired");
        } else if (Clock::now() - last_alive_ >= ttl_) {
          Lost("no etcd keepalive of this process got through for " + std::to_string(ttl_.count()) +
               " s (the lease's TTL): " + alive.error().what);
        }
        ArmKeepAlive();
      }));
}

void EtcdMember::Lost(const std::string& what) {
  lease_ = 0;
  auto listeners = listeners_;  // a listener may remove itself
  for (auto& [id, lost] : listeners) {
    if (listeners_.count(id) != 0) lost(what);
  }
}

void EtcdMember::Revoke(Done done) {
  revoked_ = true;
  keepalive_timer_.cancel();
  const std::int64_t id = lease_;
  lease_ = 0;
  if (id == 0) {
    asio::post(io_, [done = std::move(done)] { done(OkStatus()); });
    return;
  }
  asio::co_spawn(
      io_,
      [client = client_, id, done = std::move(done)]() -> asio::awaitable<void> {
        Status revoked = co_await client->LeaseRevoke(id);
        done(std::move(revoked));
      },
      asio::detached);
}

int EtcdMember::AddLeaseListener(std::function<void(std::string)> lost) {
  listeners_[next_listener_] = std::move(lost);
  return next_listener_++;
}

void EtcdMember::RemoveLeaseListener(int id) { listeners_.erase(id); }

void EtcdMember::RunTxn(etcd::TxnRequest txn, Txn done) {
  Request<etcd::TxnResponse>(
      io_, client_, [txn = std::move(txn)](etcd::Client& c) { return c.Txn(txn); },
      std::move(done));
}

void EtcdMember::Get(std::string key, Range done) {
  Request<etcd::RangeResponse>(
      io_, client_, [key = std::move(key)](etcd::Client& c) { return c.Get(key); },
      std::move(done));
}

void EtcdMember::Put(std::string key, std::string value, bool with_lease, Done done) {
  const std::int64_t lease = with_lease ? lease_ : 0;
  Request<etcd::PutResponse>(
      io_, client_,
      [key = std::move(key), value = std::move(value), lease](etcd::Client& c) {
        return c.Put(key, value, lease);
      },
      [done = std::move(done)](const Result<etcd::PutResponse>& put) {
        if (done) done(put.ok() ? OkStatus() : Status(put.error()));
      });
}

void EtcdMember::DeletePrefix(std::string prefix, Done done) {
  Request<etcd::DeleteResponse>(
      io_, client_,
      [prefix = std::move(prefix)](etcd::Client& c) { return c.DeletePrefix(prefix); },
      [done = std::move(done)](const Result<etcd::DeleteResponse>& deleted) {
        if (done) done(deleted.ok() ? OkStatus() : Status(deleted.error()));
      });
}

void EtcdMember::Increment(std::string key, Extra extra, Count done) {
  TryIncrement(std::move(key), std::move(extra), std::move(done), 20);
}

// Read the counter, then write value + 1 if nobody wrote it since (its mod_revision).
void EtcdMember::TryIncrement(std::string key, Extra extra, Count done, int tries) {
  Get(key, [this, key, extra = std::move(extra), done = std::move(done),
            tries](Result<etcd::RangeResponse> read) mutable {
    if (!read.ok()) {
      done(read.error());
      return;
    }
    int now = 0;
    std::int64_t revision = 0;
    if (!read->kvs.empty()) {
      now = std::atoi(read->kvs[0].value.c_str());
      revision = read->kvs[0].mod_revision;
    }
    const int next = now + 1;
    etcd::TxnRequest txn;
    txn.compare.push_back(revision == 0 ? etcd::Compare::Missing(key)
                                        : etcd::Compare::ModifiedAt(key, revision));
    txn.success.push_back(etcd::RequestOp::Put(key, std::to_string(next)));
    if (extra) {
      for (auto& op : extra(next)) txn.success.push_back(std::move(op));
    }
    RunTxn(std::move(txn), [this, key, extra, done = std::move(done), next,
                            tries](Result<etcd::TxnResponse> swapped) mutable {
      if (!swapped.ok()) {
        done(swapped.error());
      } else if (swapped->succeeded) {
        done(next);
      } else if (tries <= 1) {
        done(Error{"could not increment the etcd key " + key + ": too many concurrent writers",
                   "try again"});
      } else {
        TryIncrement(std::move(key), std::move(extra), std::move(done), tries - 1);
      }
    });
  });
}

// ------------------------------------ EtcdMirror ------------------------------------

struct EtcdMirror::Shared {
  std::map<std::string, etcd::KeyValue> keys;
  std::multimap<std::string, std::function<void(std::string)>> waiters;
  Changed changed;
  std::function<void(std::string)> broken;
  std::unique_ptr<etcd::Watch> watch;
  bool stopped = false;

  void Fire(const std::string& key) {
    auto range = waiters.equal_range(key);
    std::vector<std::function<void(std::string)>> due;
    for (auto it = range.first; it != range.second; ++it) due.push_back(std::move(it->second));
    waiters.erase(range.first, range.second);
    const std::string value = keys[key].value;
    for (auto& f : due) {
      if (stopped) return;
      f(value);
    }
  }
  void Apply(const etcd::Event& event, const std::string& key) {
    if (event.type == etcd::Event::Type::kPut) {
      keys[key] = event.kv;
      Fire(key);
    } else {
      keys.erase(key);
    }
    if (!stopped && changed) changed(event, key);
  }
  void Broken(const std::string& what) {
    if (!stopped && broken) broken(what);
  }
};

namespace {

asio::awaitable<void> RunMirror(std::shared_ptr<etcd::Client> client,
                                std::shared_ptr<EtcdMirror::Shared> s, std::string prefix,
                                std::function<void(Status)> ready) {
  for (int listing = 0; listing < 1000; ++listing) {
    auto listed = co_await client->GetPrefix(prefix);
    if (s->stopped) co_return;
    if (!listed.ok()) {
      if (ready) ready(listed.error());
      if (!ready) s->Broken(listed.error().what);
      co_return;
    }
    std::map<std::string, etcd::KeyValue> before = std::move(s->keys);
    s->keys.clear();
    for (const etcd::KeyValue& kv : listed->kvs) {
      etcd::Event put;
      put.kv = kv;
      s->Apply(put, kv.key.substr(prefix.size()));
    }
    for (const auto& [key, kv] : before) {  // gone while the watch was compacted away
      if (s->keys.count(key) == 0 && !s->stopped) {
        etcd::Event gone;
        gone.type = etcd::Event::Type::kDelete;
        gone.kv.key = kv.key;
        s->Apply(gone, key);
      }
    }
    etcd::WatchOptions options;
    options.key = prefix;
    options.range_end = etcd::PrefixEnd(prefix);
    options.start_revision = listed->revision + 1;
    auto opened = co_await client->OpenWatch(options);
    if (s->stopped) co_return;
    if (!opened.ok()) {
      if (ready) ready(opened.error());
      if (!ready) s->Broken(opened.error().what);
      co_return;
    }
    s->watch = std::move(*opened);
    if (ready) {
      auto first = std::move(ready);
      ready = nullptr;
      first(OkStatus());
      if (s->stopped) co_return;
    }
    for (;;) {
      auto batch = co_await s->watch->Next();
      if (s->stopped) co_return;
      if (!batch.ok()) {
        s->Broken(batch.error().what);
        co_return;
      }
      if (batch->compact_revision > 0) break;  // list again
      for (const etcd::Event& event : batch->events) {
        if (s->stopped) co_return;
        s->Apply(event, event.kv.key.substr(prefix.size()));
      }
    }
  }
}

}  // namespace

EtcdMirror::EtcdMirror(EtcdMember& member, std::string prefix)
    : member_(member), prefix_(std::move(prefix)), shared_(std::make_shared<Shared>()) {}

EtcdMirror::~EtcdMirror() { Stop(); }

void EtcdMirror::Start(std::function<void(Status)> ready) {
  asio::co_spawn(member_.io(), RunMirror(member_.client(), shared_, prefix_, std::move(ready)),
                 asio::detached);
}

void EtcdMirror::Stop() {
  shared_->stopped = true;
  shared_->waiters.clear();
  shared_->changed = nullptr;
  shared_->broken = nullptr;
  if (shared_->watch) shared_->watch->Cancel();
}

std::optional<std::string> EtcdMirror::Get(const std::string& key) const {
  auto it = shared_->keys.find(key);
  if (it == shared_->keys.end()) return std::nullopt;
  return it->second.value;
}

const etcd::KeyValue* EtcdMirror::Find(const std::string& key) const {
  auto it = shared_->keys.find(key);
  return it == shared_->keys.end() ? nullptr : &it->second;
}

void EtcdMirror::WaitKey(const std::string& key, std::function<void(std::string)> found) {
  if (auto value = Get(key)) {
    asio::post(member_.io(), [s = shared_, value = *value, found = std::move(found)] {
      if (!s->stopped) found(value);
    });
    return;
  }
  shared_->waiters.emplace(key, std::move(found));
}

void EtcdMirror::OnChange(Changed changed) { shared_->changed = std::move(changed); }

void EtcdMirror::OnBroken(std::function<void(std::string)> broken) {
  shared_->broken = std::move(broken);
}

}  // namespace gculaunch
