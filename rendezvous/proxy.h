// Proxy: a node's store proxy (--store-proxy).  The node's own ranks, and its gculaunch's node
// agent (launcher/cluster/agent_link.h), connect to it as to a TCPStore; it carries all their
// connections to node 0's store over ONE upstream connection (upstream.h), so that node 0 holds
// one connection per node instead of one per rank and two per agent.  The agent proves the job
// secret over its own stream; the proxy's proof never covers a stream.
//
// What it does with a rank's connection: a Session (session.h) decodes the rank's bytes with
// the codec's Decoder under the store's Limits, exactly as node 0's server would, and every
// complete request is re-encoded in the rank's dialect and sent as one DATA frame of the
// rank's stream.  Node 0 keeps one store connection per stream, so every operation keeps its
// semantics in both dialects (WAIT and its timeouts, CANCEL_WAIT, WATCH_KEY events, queues,
// an unknown code, which closes the connection here as it would there).  Node 0's reply bytes
// are handed to the rank's connection as they arrive; the proxy never parses replies.  Nothing
// is coalesced: eight ranks' WAITs on one key are eight streams' WAITs at node 0.
//
//   * a rank disconnects: CLOSE of its stream; node 0 forgets its parked WAIT and watches;
//   * node 0 closes a stream (the store asked for it, a new restart attempt, the cap): the
//     rank's connection is closed, as the store would have closed it;
//   * the upstream is lost (or cannot be made within connect_timeout): every rank connection
//     is closed and the listener too, so the ranks fail as against a lost store; on_lost
//     tells the launcher.  There is no reconnect: a stream's state lives at node 0.
//
// Rank connections are accepted only once the upstream is up (until then they wait in the
// listen backlog).  Accepted sockets are close-on-exec from birth (accept4), as the server's.
// Bounds: the store's Limits per request; max_queued per rank connection and for the
// upstream (past it the connection closes: for the upstream, that is a lost upstream); one
// BufferBudget of max_buffered over all of them, the largest rank connections shed first;
// max_connections rank connections.  Node 0 applies its own bounds to every stream again.
//
// Lifetime: Stop() (also the destructor) closes everything; handlers keep the internals alive.
// Threading: one io_context thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "rendezvous/codec.h"
#include "rendezvous/listener.h"

namespace spdlog {
class logger;
}

namespace gculaunch::rendezvous {

struct ProxyOptions {
  std::string upstream_host;  ///< node 0's store (MASTER_ADDR)
  std::uint16_t upstream_port = 0;
  /// The job secret (--job-secret-file): proven to node 0 before the upstream is granted.
  /// Empty: none (node 0 must have none either).  Never logged.
  std::string secret;
  Limits limits;
  std::size_t max_connections = 65536;  ///< rank connections; more are closed at once
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(60)};
  /// Posted once when the upstream was lost or could not be made, with the reason (after the
  /// rank connections were closed).  Not called after Stop().
  std::function<void(const std::string&)> on_lost;
};

class ProxyCore;

class Proxy {
 public:
  /// Starts connecting to node 0 at once; serves `listener` once connected.  `log` must
  /// outlive the Proxy and every handler.
  Proxy(boost::asio::io_context& io, ListenSocket listener, ProxyOptions options,
        spdlog::logger& log);
  ~Proxy();
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  void Stop();
  /// The port the ranks connect to.
  std::uint16_t port() const;
  /// "host:port" of node 0's store.
  std::string upstream() const;
  /// The upstream connection is up (false before it is and after it was lost).
  bool connected() const;
  /// Rank connections open now.
  std::size_t num_connections() const;
  /// The address the ranks connect to ("127.0.0.1").
  const std::string& address() const;

  // ---- for this node's agent, which reaches node 0 through the proxy too ----
  /// Posts done("") once the upstream is up (at once if it is), or done(why) once it was
  /// lost, could not be made, or the proxy stopped.
  void WhenUp(std::function<void(const std::string& lost)> done);
  /// The upstream was lost, could not be made, or the proxy stopped: it never carries
  /// anything again.
  bool lost() const;
  /// The upstream connection's socket while connected() (to look at its addresses and its
  /// server end), else -1.  The proxy keeps owning it.
  int upstream_handle() const;
  /// Failed attempts to reach node 0 so far, and the last one's error (progress lines).
  int connect_attempts() const;
  const std::string& last_connect_error() const;

 private:
  std::shared_ptr<ProxyCore> core_;
};

}  // namespace gculaunch::rendezvous
