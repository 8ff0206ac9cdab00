// Server: the TCPStore-compatible rendezvous server on Boost.Asio.
//
// What it owns: the listening socket (a ListenSocket handed over at construction), the
// Store, and the registry of live Sessions.  It accepts connections with accept4(SOCK_CLOEXEC)
// itself, so no accepted fd is ever without close-on-exec, not even between the accept and
// its handler: the launcher forks ranks from this very process.  Accepted sockets get
// TCP_NODELAY.  Both wire dialects (torch 1.x and 2.x) are served on the one port; each
// connection's dialect comes from its first bytes.
//
// Robustness: a malformed frame or an over-limit length closes only that connection, with
// one log line naming the peer and the reason (rate-limited: ServerOptions::warn_burst).
// Memory is bounded (session.h): a connection with more than limits.max_queued bytes
// unsent is closed, and when all connections together hold more than limits.max_buffered
// (requests being read, unsent replies, shared values once), the ones holding the most are
// closed until they fit.  Connections beyond max_connections are
// closed at once with a log line, except that the cap belongs to the job: at the cap, with
// ServerOptions::foreign_peer, a new connection from a local user other than the job's and
// root is refused, and any other new one takes the slot of the oldest such connection
// (idle or not); a connection of the job's user or root, or from another host, is never
// closed to make room.  When accept fails for lack of file descriptors (EMFILE,
// ENFILE, ENOBUFS, ENOMEM) the acceptor stays open and accepting resumes after
// accept_retry_delay.
//
// Who may connect, and who may steer the job (docs/security.md, docs/tcpstore-protocol.md
// section 8.5).  With ServerOptions::allow, a peer outside those networks (loopback is always
// allowed) is closed as soon as it is accepted, with a rate-limited log line.  The keys under
// "gculaunch/auth/" are the server's own, never stored: they carry the node agents' proof of
// the job secret (agent_auth.h).  With ServerOptions::agent_secret, a request that writes,
// deletes or compares-and-sets a launcher key ("gculaunch/...") on a connection that has not
// proven the secret closes that connection with a rate-limited log line; reads stay open,
// and the ranks' keys are not affected.  A store proxy's stream is such a connection: it may
// prove the secret itself (a node agent behind its proxy does), and its proxy's proof does not
// count for it.  In-process access is trusted.
//
// Restart attempts (see store.h for the key spaces): every connection is bound to the
// attempt in force when it was accepted.  BeginAttempt(n) closes every connection of older
// attempts, drops their keys, and also accepts-and-closes whatever still waits in the
// listen backlog, so a dead rank's late bytes never reach attempt n.  Call it after every
// rank of the old attempt has been reaped and before any rank of the new one starts.
//
// Launcher usage (one io_context, one thread):
//
//   // early, before anything else: own the port (0 = pick a free one)
//   auto listener = rendezvous::ListenSocket::Bind(standalone ? "127.0.0.1" : "", port);
//   if (!listener.ok()) return listener.error();
//   std::uint16_t master_port = listener->port();            // export as MASTER_PORT
//   ...
//   rendezvous::Server store(io, std::move(*listener), {}, logger);
//   store.Set("run_id", id);                                 // launcher namespace
//   ... start ranks (TORCHELASTIC_USE_AGENT_STORE=True, TORCHELASTIC_RESTART_COUNT=0) ...
//   ... a rank failed; every rank reaped ...
//   if (auto s = store.BeginAttempt(1); !s.ok()) ...
//   ... start the ranks of attempt 1 ...
//   store.Stop();                                            // io.run() then returns
//
// In-process access (Set/Get/Add/Check/DeleteKey/AsyncWait) addresses the launcher's
// namespace: key "k" here is "gculaunch/k" for socket clients (node agents).
//
// Lifetime: Stop() (also run by the destructor) closes the acceptor and every session and
// cancels the retry timer and in-process waits, so io_context::run() returns by itself once
// the aborted handlers ran.  Handlers keep the server's internals alive, so destroying the
// Server while handlers are pending is safe.
//
// Threading: every method must be called on the io_context's thread (or before it runs).
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/cidr.h"
#include "base/error.h"
#include "rendezvous/codec.h"
#include "rendezvous/listener.h"
#include "rendezvous/store.h"
#include "rendezvous/store_metrics.h"

namespace spdlog {
class logger;
}

namespace gculaunch::rendezvous {

struct ServerOptions {
  Limits limits;                        ///< per-request limits (codec.h)
  std::size_t max_connections = 65536;  ///< more are closed at once, with a log line
  /// Store proxies' streams (upstream.h) open at once, over all upstream connections; more
  /// are refused (the proxy closes that rank's connection).  Separate from max_connections:
  /// a stream holds no descriptor here, only its store connection's state (a few hundred
  /// bytes while it parks nothing), so node 0 can serve far more ranks through proxies than
  /// its open-file limit allows directly.  Only a peer past the job secret's proof (when
  /// there is one) may open streams.
  std::size_t max_streams = 65536;
  std::chrono::milliseconds accept_retry_delay{100};  ///< after EMFILE and friends
  /// What the user can change to allow more than max_connections, named in that log line
  /// (the store's caller knows: `gculaunch store` has --max-connections, a launch takes its
  /// cap from `ulimit -n`).  Empty: no hint.
  std::string connection_cap_hint;
  /// Warnings about bad connections (closed, refused): at most warn_burst lines per
  /// warn_interval, then one line that counts the rest.
  std::size_t warn_burst = 5;
  std::chrono::milliseconds warn_interval{10000};
  int first_attempt = 0;
  /// Called with every decoded request before the store handles it (tests, metrics).
  std::function<void(ConnId, const Request&)> request_observer;
  /// Posted to the io_context when a client's connection ended by itself (the peer closed
  /// it, or it failed), after the store forgot it, with the I/O error that ended it (""
  /// when the peer closed it; Session::error()).  Not for connections the server closes
  /// (BeginAttempt, Stop, a malformed frame).  The multi-node coordinator uses it to notice
  /// a node's gculaunch that died, or a host that vanished (TCP keepalive, KeepAlive()).
  /// A store proxy's stream counts as a connection: it is reported when the proxy closed it,
  /// and every stream of an upstream connection that ended is reported with it.
  std::function<void(ConnId, const std::string&)> connection_observer;
  /// Connections and requests counted here when set (store_metrics.h); null: not counted.
  std::shared_ptr<StoreMetrics> metrics;
  /// The job secret (--job-secret-file): writes of launcher keys need its proof (file
  /// comment).  Empty: no secret, everyone may write them (torch's TCPStore has no
  /// authentication).  Never logged.
  std::string agent_secret;
  /// --store-allow: only peers in these networks, and loopback, may connect.  Empty: anyone.
  std::vector<Network> allow;
  /// Whether the peer of an accepted connection (its descriptor) is a socket of this host
  /// owned by another user than the job's and root (the launcher passes
  /// sys::IsForeignLocalPeer; this layer cannot look).  Asked only at max_connections, at
  /// most once per connection.  Null: every peer counts as the job's.
  std::function<bool(int fd)> foreign_peer;
};

class ServerCore;

class Server {
 public:
  /// Starts serving `listener` at once.  `log` must outlive the Server and every handler.
  Server(boost::asio::io_context& io, ListenSocket listener, ServerOptions options,
         spdlog::logger& log);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// The bound port (the real one when port 0 was asked for).
  std::uint16_t port() const;
  /// The bound address ("127.0.0.1", "::").
  const std::string& address() const;

  /// Makes `attempt` current for new connections and closes everything of older attempts
  /// (see the file comment).  Fails, changing nothing, unless attempt > attempt().
  Status BeginAttempt(int attempt);
  int attempt() const;

  /// Closes the acceptor and every session; in-process waits complete with false.
  void Stop();
  bool stopped() const;

  // ---- in-process access to the launcher namespace (keys without "gculaunch/") ----
  /// SET semantics.  A value equal to the one set last in-process is shared with it (node 0
  /// stores an epoch's plan once per node: one copy, not N).
  void Set(const std::string& key, const std::string& value);
  std::optional<std::string> Get(const std::string& key) const;
  /// ADD semantics; fails if the current value is not a number.
  Result<std::int64_t> Add(const std::string& key, std::int64_t delta);
  bool Check(const std::vector<std::string>& keys);
  /// COMPARE_SET semantics: stores `desired` if the key holds `expected` (or is missing and
  /// `expected` is empty); returns the value the key holds afterwards (PyTorch's reply).
  std::string CompareSet(const std::string& key, const std::string& expected,
                         const std::string& desired);
  bool DeleteKey(const std::string& key);
  /// Calls done(true) once every key exists (from the io_context, never inline), or
  /// done(false) if the server stops first.
  void AsyncWait(const std::vector<std::string>& keys, std::function<void(bool)> done);

  /// Turns on TCP keepalive and TCP_USER_TIMEOUT for connection `id` (a node agent's), so
  /// that its host vanishing ends it within seconds; false when no such connection is open.
  /// For a proxied stream, its upstream connection's socket.
  bool KeepAlive(ConnId id, const TcpKeepAlive& keepalive);

  // ---- introspection ----
  std::size_t num_sessions() const;
  const Store& store() const;
  /// The listening fd and every session's fd (for close-on-exec checks in tests).
  std::vector<int> NativeHandlesForTest() const;

 private:
  std::shared_ptr<ServerCore> core_;
};

}  // namespace gculaunch::rendezvous
