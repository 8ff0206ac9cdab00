#include "launcher/run/agent_store.h"

#include <spdlog/logger.h>

#include <boost/asio/post.hpp>
#include <charconv>
#include <string>

namespace gculaunch {

bool HostsAgentStore(const LaunchSpec& spec) {
  // With an elected leader the leader of each term serves the ranks' store, wherever it
  // runs (the backend's seat in launcher/cluster/).
  if (CapabilitiesOf(spec.rdzv).elected_leader) return false;
  // In a multi-node job node 0 always hosts it: the node agents meet there, whoever hosts
  // the ranks' store.
  return spec.node_rank == 0 && (spec.store_mode == StoreMode::kAgent || spec.nnodes > 1);
}

Result<rendezvous::ListenSocket> BindStorePort(const LaunchSpec& spec, int* bind_errno) {
  // --standalone keeps the store off the network; a job that other nodes
  // join must be reachable on every interface (IPv4 and IPv6).
  const std::string host = spec.standalone ? spec.master_addr : "";
  const int port = spec.nnodes > 1 ? spec.agent_port : spec.master_port;
  auto socket = rendezvous::ListenSocket::Bind(host, static_cast<std::uint16_t>(port),
                                               rendezvous::kDefaultBacklog, bind_errno);
  if (!socket.ok()) {
    const std::string where =
        (host.empty() ? std::string("all interfaces") : host) + " port " + std::to_string(port);
    return Error{"cannot host the ranks' store on " + where + ": " + socket.error().what,
                 spec.standalone ? "pick another --master-port, or leave it out to get a free one"
                                 : "pick a free --master-port (MASTER_PORT) on the master node"};
  }
  return socket;
}

AgentStore::AgentStore(boost::asio::io_context& io, rendezvous::ListenSocket socket,
                       spdlog::logger& log, rendezvous::ServerOptions options)
    : io_(io), log_(log), server_(io, std::move(socket), WatchInit(std::move(options)), log) {
  log_.debug("store: serving the ranks on {} port {} (TORCHELASTIC_USE_AGENT_STORE=True)",
             server_.address(), server_.port());
}

AgentStore::~AgentStore() { server_.Stop(); }

void AgentStore::BeginAttempt(int restart_count) {
  if (restart_count <= server_.attempt()) return;  // the first attempt owns the initial space
  if (auto status = server_.BeginAttempt(restart_count); !status.ok()) {
    log_.warn("store: cannot start a fresh key space for attempt {}: {}", restart_count,
              status.error().what);
    return;
  }
  log_.debug("store: attempt {} has a fresh key space", restart_count);
}

void AgentStore::Stop() { server_.Stop(); }

// Chains an observer of the ranks' "init/" ADDs before the one `options` had (the
// coordinator's).  The observer runs before the store handles the request: the count is read
// in a handler posted after it.
rendezvous::ServerOptions AgentStore::WatchInit(rendezvous::ServerOptions options) {
  options.request_observer = [this, next = std::move(options.request_observer)](
                                 rendezvous::ConnId id, const rendezvous::Request& request) {
    if (request.op == rendezvous::Op::kAdd && request.keys.size() == 1 &&
        request.keys[0] == "init/" && *on_connecting_) {
      boost::asio::post(io_, lifetime_.Wrap([this] { ReportInit(); }));
    }
    if (next) next(id, request);
  };
  return options;
}

void AgentStore::ReportInit() {
  const std::string* value = server_.store().Find(rendezvous::Scope::kAttempt, "init/");
  if (value == nullptr || !*on_connecting_) return;
  std::int64_t count = 0;
  const auto [ptr, ec] = std::from_chars(value->data(), value->data() + value->size(), count);
  if (ec != std::errc()) return;  // not torch's counter (any client may write the key)
  (*on_connecting_)(server_.attempt(), count);
}

}  // namespace gculaunch
