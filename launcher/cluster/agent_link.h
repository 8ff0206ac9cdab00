// AgentLink: how a node agent reaches the job's keys (job_protocol.h) in the master's store.
//
//   LocalAgentLink   node 0: the store is in this process (rendezvous::Server's in-process
//                    access to the launcher namespace)
//   RemoteAgentLink  every other node: two connections of the C++ store client to
//                    MASTER_ADDR:MASTER_PORT, keys prefixed "gculaunch/"
//
// Every operation completes through its callback, posted to the io_context (never inline),
// so a callback may start the next operation or change the caller's state freely.
//
// RemoteAgentLink connects like torch's clients do (exponential back-off with jitter until
// the deadline, rendezvous/client.h) and prints a progress line every 10 s while it waits:
// the master being minutes late is normal.  It then keeps two connections, both with TCP
// keepalive and TCP_USER_TIMEOUT (a vanished host is noticed in seconds):
//   control  one request at a time from a queue: registration, reports, markers, and a
//            heartbeat (ADD job/hb/<node>) every `heartbeat_interval` when idle
//   watch    the agent's one blocking WAIT (the next plan, or the epoch's marker)
// Slow is not dead (liveness.h): a failure of either connection (closed, reset, or timed out
// by keepalive or TCP_USER_TIMEOUT: the master's host is gone) means the master is lost at
// once; a master that is merely silent while a request waits (stopped, starved, wedged) is
// lost only once its silence passes the adaptive bound of `node_timeout`, counted in this
// process's own running time (a check every `silence_check` measures how late this process
// itself was) and never while either connection has bytes waiting to be read.  Either way
// the loss is reported once through `on_lost`; later operations fail at once.  Each connection
// begins with the proof of the job secret (rendezvous/agent_auth.h): it asks node 0 for a nonce
// and, when node 0 has a secret, answers with the HMAC of the nonce under this node's own secret.
// A node 0 with a secret and a node without one, or the reverse, or two different secrets, fail
// Connect with one line (exit code 2: a configuration to fix); the secret never crosses the wire.
// Node 0 proves the secret first, over a nonce this node chose, and a node 0 that cannot is
// refused before this node sends its own proof.  When the store's port was found taken on
// this host (check_listener_owner), each connection's server end must belong to this user or
// root before the link says anything on it.  With --store-proxy (RemoteLinkOptions::proxy)
// both connections go to this node's store proxy, which carries them to node 0 as streams of
// its one upstream connection: the proof of the secret, the heartbeats and the liveness rules
// are the same end to end, and node 0 sees the node's gculaunch end when its stream or the
// upstream ends.
//
// Lifetime: the owner keeps the link alive while it runs the io_context; Close() ends both
// connections, and callbacks of operations still pending then complete with errors (or
// never, once the link is destroyed: pending handlers hold only a weak reference).
// Thread safety: the io_context's thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/error.h"
#include "base/lifetime.h"

namespace spdlog {
class logger;
}

namespace gculaunch::rendezvous {
class Proxy;
class Server;
}  // namespace gculaunch::rendezvous

namespace gculaunch {

class AgentLink {
 public:
  using Done = std::function<void(Status)>;
  using Value = std::function<void(Result<std::string>)>;

  virtual ~AgentLink() = default;
  /// Keys are named as in job_protocol.h (without "gculaunch/").
  virtual void Set(const std::string& key, const std::string& value, Done done) = 0;
  /// COMPARE_SET; the value is what the key holds afterwards.
  virtual void CompareSet(const std::string& key, const std::string& expected,
                          const std::string& desired, Value done) = 0;
  /// GET (a missing key reads as "").
  virtual void Get(const std::string& key, Value done) = 0;
  /// ADD; the value is the sum afterwards, in decimal.
  virtual void Add(const std::string& key, std::int64_t delta, Value done) = 0;
  /// Waits until `key` exists, then reads it.  At most one at a time.
  virtual void WaitGet(const std::string& key, Value done) = 0;
  virtual void Close() = 0;
};

class LocalAgentLink : public AgentLink {
 public:
  /// `server` must outlive the link.
  LocalAgentLink(boost::asio::io_context& io, rendezvous::Server& server);
  void Set(const std::string& key, const std::string& value, Done done) override;
  void CompareSet(const std::string& key, const std::string& expected, const std::string& desired,
                  Value done) override;
  void Get(const std::string& key, Value done) override;
  void Add(const std::string& key, std::int64_t delta, Value done) override;
  void WaitGet(const std::string& key, Value done) override;
  void Close() override;

 private:
  boost::asio::io_context& io_;
  rendezvous::Server& server_;
  bool open_ = true;        ///< false after Close()
  LifetimeGuard lifetime_;  ///< a WaitGet completing after the link is destroyed does nothing
};

struct RemoteLinkOptions {
  std::string host;  ///< MASTER_ADDR (no brackets)
  int port = 0;      ///< the port node 0's gculaunch serves the agents on
  std::chrono::milliseconds connect_timeout{std::chrono::minutes(15)};  ///< --rdzv-timeout
  /// Node rank at rendezvous: why this node is not the store host (MatchThisHost), for the
  /// "waiting for the master node" line; empty: not said.
  std::string not_host_why;
  std::chrono::milliseconds progress_period{10000};
  std::chrono::milliseconds initial_backoff{100};
  std::chrono::milliseconds max_backoff{1000};
  std::chrono::milliseconds heartbeat_interval{1000};
  /// --node-timeout: the ceiling of the master's silence while a request waits (the floor
  /// is half of it; liveness.h).
  std::chrono::milliseconds node_timeout{30000};
  /// How often that silence is judged while a request waits.
  std::chrono::milliseconds silence_check{250};
  /// TCP keepalive (idle, interval, probes) and TCP_USER_TIMEOUT on both connections.
  std::chrono::seconds keepalive_idle{2};
  std::chrono::seconds keepalive_interval{1};
  int keepalive_probes = 3;
  std::chrono::milliseconds user_timeout{5000};
  /// The job secret (--job-secret-file); empty: none.  Never logged.
  std::string secret;
  /// The store's port was taken on this host (store_host.h, rule 3): before anything else
  /// on each connection, the process serving its other end must be this user's or root's
  /// (sys::PeerSocketOwner); another user's is refused (exit code 2).
  bool check_listener_owner = false;
  /// --store-proxy on a node that proxies the store (rank_env.h ProxiesStore): this node's
  /// store proxy, which then carries both connections to node 0 as streams of its one
  /// upstream connection, so that node 0 holds one socket per node.  Waited for while it
  /// connects; once it cannot carry them (it never reached node 0, or was lost), the link
  /// connects directly.  Null: directly.  Must outlive the link.
  rendezvous::Proxy* proxy = nullptr;
};

class RemoteLinkCore;

class RemoteAgentLink : public AgentLink {
 public:
  /// `log` must outlive the link and the io_context's handlers.
  RemoteAgentLink(boost::asio::io_context& io, RemoteLinkOptions options, spdlog::logger& log);
  ~RemoteAgentLink() override;
  RemoteAgentLink(const RemoteAgentLink&) = delete;
  RemoteAgentLink& operator=(const RemoteAgentLink&) = delete;

  /// Connects both connections; done(error) once the deadline passed: the error names
  /// MASTER_ADDR:MASTER_PORT, the attempts, the time spent and what to check.
  void Connect(Done done);
  /// The numeric local address of the control connection (net_address.h); "" before Connect.
  std::string local_address() const;
  /// "198.18.0.1:29500" or "[fd00::1]:29500".
  std::string endpoint() const;
  /// Drops both connections (pending operations fail) so that Connect() can start over,
  /// with `connect_timeout` as its new deadline: node 0 went away and may come back.
  void Reset(std::chrono::milliseconds connect_timeout);
  /// Starts the heartbeat (ADD 1 to `key`, named as in job_protocol.h); `on_lost(what)` is
  /// called once when either connection fails or the master stays silent past the bound
  /// (also for failures of ordinary operations).  With `also_read`, every beat also GETs that
  /// key, pipelined with the ADD (one write each way), and ReadAtBeat() hands out the value: a
  /// node polls node 0 without a round trip of its own (16k nodes polling twice a second
  /// would be 32k requests a second at node 0).
  void StartHeartbeat(const std::string& key, std::function<void(std::string)> on_lost,
                      const std::string& also_read = "");
  /// When the latest beat read `also_read` within two beats' time: posts `done` with its
  /// value and returns true.  Else false (no beat yet, or the control connection was too
  /// busy to beat): the caller reads the key itself.
  bool ReadAtBeat(Value done);
  /// Stops heartbeating (the node said bye); the connections stay for pending operations.
  void StopHeartbeat();

  void Set(const std::string& key, const std::string& value, Done done) override;
  void CompareSet(const std::string& key, const std::string& expected, const std::string& desired,
                  Value done) override;
  void Get(const std::string& key, Value done) override;
  void Add(const std::string& key, std::int64_t delta, Value done) override;
  void WaitGet(const std::string& key, Value done) override;
  void Close() override;

 private:
  std::shared_ptr<RemoteLinkCore> core_;
};

}  // namespace gculaunch
