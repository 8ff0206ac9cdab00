// EtcdMember: this process's etcd client and its one lease, which every piece of a job on
// etcd shares (docs/etcd.md, "Job rendezvous on etcd").  The lease is granted at Start() and
// kept alive every TTL/3; listeners hear when it ends (etcd says it expired, or no keepalive
// got through for a whole TTL), after which a fresh lease is granted.  It also runs the
// requests of the boards and the seat (callbacks on the io_context, never inline) and the
// counters (compare-and-swap on the key's mod_revision, bounded retries).
//
// Lifetime: the member outlives its mirrors (etcd_mirror.h), boards and seat.  Destroying it
// stops the keepalive without revoking the lease (its keys go when the TTL ends, like a killed
// process's); Revoke() ends it at once.
// Thread safety: the io_context's thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/lifetime.h"
#include "etcd/client.h"

namespace gculaunch {

/// Who a process is, as the leader key names it.
struct EtcdIdentity {
  std::string host;
  int pid = 0;
  std::string incarnation;  ///< fresh per gculaunch start
};

class EtcdMember {
 public:
  using Txn = std::function<void(Result<etcd::TxnResponse>)>;
  using Range = std::function<void(Result<etcd::RangeResponse>)>;
  using Done = std::function<void(Status)>;
  using Count = std::function<void(Result<int>)>;
  /// Operations a counter's transaction adds once the next value `next` is known.
  using Extra = std::function<std::vector<etcd::RequestOp>(int next)>;

  /// `prefix`: the job's keys, "<etcd prefix>/<rdzv id>/" (ends with '/').
  EtcdMember(boost::asio::io_context& io, etcd::ClientOptions options, std::string prefix,
             std::chrono::seconds ttl, EtcdIdentity identity);
  ~EtcdMember();
  EtcdMember(const EtcdMember&) = delete;
  EtcdMember& operator=(const EtcdMember&) = delete;

  /// Grants the lease and starts the keepalive; `ready` once the lease exists (or not).
  void Start(Done ready);
  /// Ends the lease now (its keys are deleted); the keepalive stops.
  void Revoke(Done done);

  std::int64_t lease() const { return lease_; }
  const std::string& prefix() const { return prefix_; }
  const EtcdIdentity& identity() const { return identity_; }
  std::chrono::seconds ttl() const { return ttl_; }
  boost::asio::io_context& io() { return io_; }
  const std::shared_ptr<etcd::Client>& client() const { return client_; }

  /// `lost(what)` every time the lease ends; returns an id for RemoveLeaseListener.
  int AddLeaseListener(std::function<void(std::string)> lost);
  void RemoveLeaseListener(int id);

  void RunTxn(etcd::TxnRequest txn, Txn done);
  void Get(std::string key, Range done);
  void Put(std::string key, std::string value, bool with_lease, Done done);
  void DeletePrefix(std::string prefix, Done done);
  /// Counter `key` (absent: 0) plus one, by compare-and-swap; `extra` ops go into the same
  /// transaction.  `done` gets the new value.
  void Increment(std::string key, Extra extra, Count done);

 private:
  void Grant(Done ready);
  void ArmKeepAlive();
  void KeepAlive();
  void Lost(const std::string& what);
  void TryIncrement(std::string key, Extra extra, Count done, int tries);

  boost::asio::io_context& io_;
  std::shared_ptr<etcd::Client> client_;
  std::string prefix_;
  std::chrono::seconds ttl_;
  EtcdIdentity identity_;
  std::int64_t lease_ = 0;
  bool revoked_ = false;
  std::chrono::steady_clock::time_point last_alive_;
  std::map<int, std::function<void(std::string)>> listeners_;
  int next_listener_ = 1;
  boost::asio::steady_timer keepalive_timer_;
  LifetimeGuard lifetime_;  ///< last member: expires first
};

}  // namespace gculaunch
