// AgentStore: the ranks' TCPStore, hosted by gculaunch itself.
//
// With the agent store (the default; TORCHELASTIC_USE_AGENT_STORE=True) every
// rank is a client of a rendezvous::Server that the master node's gculaunch
// runs on MASTER_PORT, so no rank races another to bind a port, and the
// launcher owns the store's lifetime across restarts.
//
// Two steps, because the port must be owned before anything else happens and
// the server needs the event loop that comes later:
//   1. BindStorePort(spec): bind MASTER_PORT (port 0: a free port, kept bound;
//      no bind-release-rebind race) on loopback for --standalone, on all
//      interfaces otherwise.  Only the node with node_rank 0 hosts.  In a
//      multi-node job node 0 hosts it even with --no-agent-store: the node
//      agents meet there (docs/multinode.md); the ranks then use rank 0's.
//   2. AgentStore(io, socket, log): serve it on the launcher's io_context, and
//      give each restart attempt its own key space: the Supervisor calls
//      BeginAttempt(n) only once every rank of attempt n-1 has been reaped, so
//      a dead rank's late bytes can never reach attempt n (rendezvous/server.h).
//
// Thread safety: the io_context's thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>

#include "base/error.h"
#include "launcher/frontend/launch_spec.h"
#include "launcher/run/supervisor.h"
#include "rendezvous/listener.h"
#include "rendezvous/server.h"

namespace spdlog {
class logger;
}

namespace gculaunch {

/// Whether this node's gculaunch hosts the ranks' store.
bool HostsAgentStore(const LaunchSpec& spec);

/// Binds the store's port for `spec` (see the file comment).  The error names
/// the port and the flag that changes it; `bind_errno` (if given) its errno.
Result<rendezvous::ListenSocket> BindStorePort(const LaunchSpec& spec, int* bind_errno = nullptr);

class AgentStore : public AttemptObserver {
 public:
  /// Serves `socket` on `io` at once.  `log` must outlive the AgentStore.  `options`: the
  /// multi-node coordinator's connection hooks (coordinator.h); none on a single node.
  AgentStore(boost::asio::io_context& io, rendezvous::ListenSocket socket, spdlog::logger& log,
             rendezvous::ServerOptions options = {});
  ~AgentStore() override;
  AgentStore(const AgentStore&) = delete;
  AgentStore& operator=(const AgentStore&) = delete;

  /// Gives attempt `restart_count` a fresh key space (no-op for the first one).
  void BeginAttempt(int restart_count) override;
  /// Closes the port and every connection.
  void Stop();

  rendezvous::Server& server() { return server_; }
  const rendezvous::Server& server() const { return server_; }

 private:
  spdlog::logger& log_;
  rendezvous::Server server_;
};

}  // namespace gculaunch
