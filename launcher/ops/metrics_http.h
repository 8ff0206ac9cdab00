// MetricsHttpServer: --metrics-port's HTTP server on the job's io_context (Boost.Beast).
//
//   GET /metrics   200, the Prometheus text format (metrics.h) that `render` returns now
//   GET /healthz   200 "ok": the event loop answers (a liveness probe)
//   GET /readyz    200 "ready: ..." or 503 "not ready: ...", one line from `ready`
//                  (readiness.h: a readiness or startup probe)
//   HEAD           the same headers, no body
//   other paths    404 with a one-line hint; other methods 405
// HTTP/1.0 and 1.1, keep-alive honoured.  Untrusted input, bounded: a request head over 8 KiB,
// a head not complete 5 s after it began (a fresh connection's head: 5 s after the accept),
// any body, or a keep-alive connection idle for 30 s ends that connection.  At most 32
// connections are served at once; when all are taken, a new one evicts the connection that
// has waited longest for a request (idle keep-alive or a slow head), so slow clients cannot
// starve a scrape; only when all 32 are busy answering is the new one closed at once.  The
// slots are the job's first: a connection from another local user than the job's and root
// (sys::IsForeignLocalPeer, looked up only when all 32 are taken) makes room only by evicting
// another such connection, and a new connection of anyone else evicts those first, so a
// stranger's reconnecting clients cannot push out a scrape of the job's user or root.  The
// listening socket and every accepted one are close-on-exec from birth (rendezvous::ListenSocket,
// accept4), so no rank inherits them.
//
// Ownership: owns the acceptor; each connection keeps itself alive through its pending
// handlers and ends when the io_context stops or Stop() closes the acceptor and it is idle.
// `render` and `ready` must stay callable while the server lives.
// Thread safety: the io_context's thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/error.h"
#include "launcher/ops/accept_backoff.h"
#include "launcher/ops/readiness.h"
#include "rendezvous/listener.h"

namespace gculaunch {

class MetricsHttpCore;

class MetricsHttpServer {
 public:
  using Render = std::function<std::string()>;
  using Ready = std::function<Readiness()>;

  /// Binds addr:port (port 0: a free one), before the event loop exists, as the store's port
  /// is.  The error names the flag, the address and the reason ("Address already in use").
  static Result<rendezvous::ListenSocket> Bind(const std::string& addr, std::uint16_t port);
  /// Serves the bound socket on `io`: /metrics from `render`, /readyz from `ready`.
  MetricsHttpServer(boost::asio::io_context& io, rendezvous::ListenSocket socket, Render render,
                    Ready ready);
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  std::uint16_t port() const;
  /// Closes the acceptor and every connection.
  void Stop();
  /// Where the one line about a failing accept goes (accept_backoff.h).
  void set_warn(AcceptBackoff::Warn warn);

 private:
  std::shared_ptr<MetricsHttpCore> core_;
};

}  // namespace gculaunch
