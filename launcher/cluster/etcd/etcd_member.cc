#include "launcher/cluster/etcd/etcd_member.h"

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

}  // namespace gculaunch
