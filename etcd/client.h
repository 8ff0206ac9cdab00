// Client: an etcd v3 client over etcd's HTTP/JSON gateway, on Boost.Asio C++20 coroutines.
//
// For the cluster layer's job boards on etcd: create-only registration (a transaction guarded
// by Compare::Missing), liveness as a lease kept alive (one POST per refresh), plans and
// markers as transactions guarded by a revision, and watches instead of polling. It speaks
// HTTP/1.1 with Beast to etcd's gateway (/v3/kv/..., /v3/lease/..., /v3/watch,
// /v3/auth/authenticate, GET /version); the JSON and its traps are in gateway.h, the reasons
// and the whole API in docs/etcd.md.
//
//   etcd::Client client(io.get_executor(), {.endpoints =
//   *etcd::ParseEndpoints("h1:2379,h2:2379")}); auto created = co_await client.Txn({.compare =
//   {etcd::Compare::Missing(key)},
//                                       .success = {etcd::RequestOp::Put(key, value, lease)}});
//   if (created.ok() && !created->succeeded) { ... someone else holds the key ... }
//
// Requests: every call is one HTTP request on a fresh connection (no pooling: a rendezvous
// sends a few requests per second at most). A request goes to the current endpoint; a refused
// connection, a timeout, a broken connection or an "unavailable" answer moves on to the next
// endpoint, each endpoint tried once per call; when all fail the Error names every endpoint
// and its reason. A transaction that timed out may still have been applied: callers that
// retry a non-idempotent transaction must read before writing again (docs/etcd.md).
//
// Authentication: with a user, the client authenticates before its first request and sends
// the token in the Authorization header; when etcd rejects the token (it expired: 300 s by
// default, and etcd forgets tokens when it restarts), it authenticates again and repeats the
// request once.
//
// Watches: Watch() opens a newline-delimited JSON stream; Next() returns the next events. A
// broken stream is reopened (fail-over included) at the revision after the last event
// delivered, so no event is lost or repeated; a start revision that was compacted away ends
// the watch with WatchBatch::compact_revision set.
//
// TLS: https:// endpoints (all or none) go through OpenSSL (linked statically): the server's
// certificate is verified against TlsOptions::ca_file (else the system's CA store) and must
// name the endpoint's host (a DNS name, or an IP address as an IP SAN); a client certificate
// is sent when one is given (etcd's --client-cert-auth). Every TLS failure is an Error naming
// the endpoint or the file and the reason (docs/etcd.md, "TLS").
//
// Errors are Results (nothing throws).
//
// Lifetime and threading: all calls on the executor the client was made with (one thread).
// Several calls may be in flight at once (each has its own connection). A Watch shares the
// client's endpoints and token and may outlive the Client object. Sockets are close-on-exec.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "etcd/gateway.h"

namespace gculaunch::etcd {

/// Error::exit_code of a refusal that asking again cannot cure: etcd (or its TLS layer)
/// answered, and refused this client's certificate, password or permissions, on every
/// endpoint. A launcher stops at once with it (a configuration to fix, exit status 2)
/// instead of retrying until its deadline.
inline constexpr int kRefusedExitCode = 2;

struct Endpoint {
  std::string host;
  std::uint16_t port = 2379;
  /// An https:// endpoint: TLS on this connection.
  bool tls = false;
  /// "host:port" ("[v6]:port"), for messages.
  std::string ToString() const;
};

/// Parses "host:port[,host:port...]"; each may start with "http://" or "https://" (TLS; a
/// list mixing both is refused); the port defaults to 2379; IPv6 addresses in brackets. An
/// Error names the bad entry.
Result<std::vector<Endpoint>> ParseEndpoints(std::string_view text);

/// Files for https:// endpoints (PEM). All are read when the first request is sent; a file
/// that cannot be read fails every call with an Error naming it.
struct TlsOptions {
  /// The CA certificate(s) that etcd's server certificate must chain to; "": the system's
  /// CA store (OpenSSL's default paths, $SSL_CERT_FILE, and the usual distribution bundles).
  std::string ca_file;
  /// A client certificate and its private key, for etcd's --client-cert-auth; both or none.
  std::string cert_file;
  std::string key_file;
  bool empty() const { return ca_file.empty() && cert_file.empty() && key_file.empty(); }
};

struct ClientOptions {
  std::vector<Endpoint> endpoints;
  /// With a user, every request carries a token from POST /v3/auth/authenticate.
  std::string user;
  std::string password;
  /// For https:// endpoints; giving files with http:// endpoints is an Error.
  TlsOptions tls;
  /// The longest one TCP connect (and TLS handshake) may take on one endpoint.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(2)};
  /// The longest one request may take on one endpoint, connect included.
  std::chrono::milliseconds request_timeout{std::chrono::seconds(5)};
};

struct WatchOptions {
  std::string key;
  std::string range_end;  ///< "" for the one key; PrefixEnd(prefix) for a prefix
  /// The first revision to report; 0: changes after the watch is created.
  std::int64_t start_revision = 0;
  bool prev_kv = false;
  /// How long Next() keeps reopening a broken stream (all endpoints, with pauses) before it
  /// gives up with an Error.
  std::chrono::milliseconds reconnect_timeout{std::chrono::seconds(10)};
};

/// What Next() returns: events of one or more revisions in order, or the end of the watch
/// because its start revision was compacted.
struct WatchBatch {
  std::vector<Event> events;
  /// > 0: the revision this watch needed is compacted; the store's history starts here. The
  /// watch is over: read the current state and watch again from its revision + 1.
  std::int64_t compact_revision = 0;
};

struct ClientState;  // shared by a Client and its Watches (client.cc)
class Watch;

class Client {
 public:
  template <typename T>
  using Task = boost::asio::awaitable<T>;

  /// REQUIRES: options.endpoints is not empty.
  Client(boost::asio::any_io_executor executor, ClientOptions options);
  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  // The requests below are serialised before the call returns: the arguments need not
  // outlive the awaitable.

  /// The one key (an empty kvs when it does not exist).
  Task<Result<RangeResponse>> Get(const std::string& key);
  /// Every key that starts with `prefix`, in key order.
  Task<Result<RangeResponse>> GetPrefix(const std::string& prefix);
  /// Keys in [key, range_end) as of `revision` (0: the latest).
  Task<Result<RangeResponse>> Range(const std::string& key, const std::string& range_end,
                                    std::int64_t revision = 0);
  /// Writes the key, attached to `lease` (0: none).
  Task<Result<PutResponse>> Put(const std::string& key, const std::string& value,
                                std::int64_t lease = 0);
  Task<Result<DeleteResponse>> Delete(const std::string& key);
  Task<Result<DeleteResponse>> DeletePrefix(const std::string& prefix);
  /// One transaction; `succeeded` tells which branch ran.
  Task<Result<TxnResponse>> Txn(const TxnRequest& txn);

  /// A new lease of `ttl` seconds.
  Task<Result<Lease>> LeaseGrant(std::int64_t ttl);
  /// One refresh (POST /v3/lease/keepalive); expired (or revoked) is a value, not an Error.
  Task<Result<KeepAliveResponse>> LeaseKeepAlive(std::int64_t id);
  /// Ends the lease now; its keys are deleted. An unknown lease is an Error.
  Task<Status> LeaseRevoke(std::int64_t id);

  /// Drops history before `revision` (POST /v3/kv/compaction); returns the store's revision.
  /// The tests compact to prove that a watch lists again; gculaunch never compacts.
  Task<Result<std::int64_t>> CompactForTest(std::int64_t revision);
  /// GET /version of the current endpoint (fail-over as for every request).
  Task<Result<VersionInfo>> Version();
  /// Opens a watch stream and waits for etcd to confirm it.
  Task<Result<std::unique_ptr<Watch>>> OpenWatch(WatchOptions options);

  /// The endpoint the next request goes to first.
  std::string current_endpoint() const;
  /// How many tokens the client obtained so far (tests and diagnostics).
  int authentications() const;

 private:
  std::shared_ptr<ClientState> state_;
};

/// A watch stream (see the header comment).
class Watch {
 public:
  template <typename T>
  using Task = boost::asio::awaitable<T>;

  Watch(std::shared_ptr<ClientState> state, WatchOptions options);
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;
  ~Watch();

  /// Waits for the next events (no time limit while the stream is healthy). An Error when the
  /// watch was cancelled, or the stream could not be reopened within reconnect_timeout.
  Task<Result<WatchBatch>> Next();
  /// Closes the stream; the next Next() reopens it at next_revision() (on the next endpoint
  /// when this one fails).
  void Disconnect();
  /// Closes the stream for good: a pending Next() returns an Error.
  void Cancel();
  /// The revision the stream resumes at: the last delivered event's revision + 1.
  std::int64_t next_revision() const;

  struct Stream;  // the open HTTP stream (client.cc)

 private:
  friend class Client;  // OpenWatch() opens the first stream
  Task<Status> Open();
  Task<Status> Reopen();
  Task<Result<WatchMessage>> ReadMessage();

  std::shared_ptr<ClientState> state_;
  WatchOptions options_;
  std::unique_ptr<Stream> stream_;
  std::string pending_;  ///< bytes of the stream after the last whole line
  std::int64_t next_revision_ = 0;
  std::int64_t compacted_ = 0;  ///< > 0 once etcd ended the watch for a compaction
  bool cancelled_ = false;
};

}  // namespace gculaunch::etcd
