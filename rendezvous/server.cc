#include "rendezvous/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <cstring>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "rendezvous/agent_auth.h"
#include "rendezvous/session.h"
#include "rendezvous/upstream.h"

namespace gculaunch::rendezvous {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

// Accepts per turn before yielding to other handlers (a connect storm must not starve the
// sessions that are already talking).
constexpr int kAcceptBatch = 64;

std::string SizeText(std::size_t bytes) {
  if (bytes >= (10u << 20)) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (10u << 10)) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

std::string PeerText(const sockaddr_storage& ss) {
  char text[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(ss);
    ::inet_ntop(AF_INET, &in.sin_addr, text, sizeof text);
    return std::string(text) + ":" + std::to_string(ntohs(in.sin_port));
  }
  if (ss.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(ss);
    if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr)) {
      ::inet_ntop(AF_INET, &in6.sin6_addr.s6_addr[12], text, sizeof text);
      return std::string(text) + ":" + std::to_string(ntohs(in6.sin6_port));
    }
    ::inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof text);
    return "[" + std::string(text) + "]:" + std::to_string(ntohs(in6.sin6_port));
  }
  return "unknown peer";
}

// The peer's address bytes (4 for IPv4, 16 for IPv6) for Contains/IsLoopback.
std::pair<const std::uint8_t*, std::size_t> AddressBytes(const sockaddr_storage& ss) {
  if (ss.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(ss);
    return {reinterpret_cast<const std::uint8_t*>(&in.sin_addr), 4};
  }
  if (ss.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(ss);
    return {in6.sin6_addr.s6_addr, 16};
  }
  return {nullptr, 0};
}

// Requests that change what a key holds (the ones the job secret guards).
bool Writes(Op op) {
  switch (op) {
    case Op::kSet:
    case Op::kCompareSet:
    case Op::kAdd:
    case Op::kDeleteKey:
    case Op::kAppend:
    case Op::kMultiSet:
    case Op::kQueuePush:
    case Op::kQueuePop:
      return true;
    default:
      return false;
  }
}

bool IsFdShortage(int err) {
  return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

// Errors accept(2) asks to treat like "try again" (pending network errors of the new socket).
bool IsTransientAcceptError(int err) {
  switch (err) {
    case EINTR:
    case ECONNABORTED:
    case EPROTO:
    case ENETDOWN:
    case ENOPROTOOPT:
    case EHOSTDOWN:
    case ENONET:
    case EHOSTUNREACH:
    case EOPNOTSUPP:
    case ENETUNREACH:
    case EPERM:
      return true;
    default:
      return false;
  }
}

}  // namespace

class ServerCore;

// One store proxy's upstream connection at node 0 (upstream.h): its streams, each a store
// connection of its own, so that the store treats a proxied rank exactly as a direct one.
struct UpstreamLink final : UpstreamDemux::Handler {
  UpstreamLink(ServerCore& owner, std::shared_ptr<Session> upgraded, const Limits& limits)
      : core(owner), session(std::move(upgraded)), demux(limits) {}
  bool OnOpen(std::uint32_t stream) override;
  void OnRequest(std::uint32_t stream, Request& request) override;
  void OnClose(std::uint32_t stream) override;
  void OnMalformed(std::uint32_t stream, const std::string& reason) override;

  ServerCore& core;
  std::shared_ptr<Session> session;
  UpstreamDemux demux;
  std::unordered_map<std::uint32_t, ConnId> ids;  ///< the store connection of each stream
};

// The server's state, shared with its pending handlers so that they never outlive it.
class ServerCore final : public SessionOwner, public std::enable_shared_from_this<ServerCore> {
 public:
  ServerCore(asio::io_context& io, ListenSocket listener, ServerOptions options,
             spdlog::logger& log)
      : io_(io),
        acceptor_(io),
        retry_timer_(io),
        warn_timer_(io),
        options_(std::move(options)),
        log_(log),
        store_(options_.first_attempt, options_.limits.max_value_size),
        budget_(std::make_shared<BufferBudget>(options_.limits.max_buffered)),
        port_(listener.port()),
        address_(listener.address()) {
    const auto protocol = listener.family() == AF_INET6 ? tcp::v6() : tcp::v4();
    const int fd = listener.Release();
    boost::system::error_code ec;
    acceptor_.assign(protocol, fd, ec);
    if (ec) {
      ::close(fd);
      log_.error("cannot serve the store on port {}: {}", port_, ec.message());
      stopped_ = true;
    }
    launcher_conn_ = next_id_++;
    store_.Open(launcher_conn_, Scope::kLauncher);
  }

  void Start() {
    if (stopped_) return;
    log_.debug("store listening on {}:{}",
               address_.find(':') == std::string::npos ? address_ : "[" + address_ + "]", port_);
    ArmAccept();
  }

  // ---- SessionOwner ----

  void OnRequest(Session& session, Request& request) override {
    if (Guard(session, request)) return;
    if (options_.request_observer) options_.request_observer(session.id(), request);
    const auto begin = options_.metrics ? Clock::now() : Clock::time_point{};
    effects_.Clear();
    store_.Handle(session.id(), request, session.output(), effects_);
    if (options_.metrics) Measure(session.id(), request.op, begin);
    if (request.op == Op::kWait && log_.should_log(spdlog::level::debug) &&
        store_.IsParked(session.id())) {
      log_.debug("connection {} from {}: {} parked", session.id(), session.peer(),
                 Describe(request));
    }
    Dispatch(effects_, &session);
    if (effects_.close()) session.CloseAfterFlush(effects_.close_reason);
  }

  void WarnClose(const Session& session, const std::string& reason) override {
    Warn(fmt::format("closing connection {} from {}: {}", session.id(), session.peer(), reason));
  }

  // Closes the connections holding the most until the budget fits again.
  void OnOverBudget() override {
    if (shedding_) return;
    shedding_ = true;
    while (budget_->over()) {
      std::shared_ptr<Session> victim;
      std::size_t most = 0;
      for (auto& [id, session] : sessions_) {
        const std::size_t held = session->footprint();
        if (!session->closed() && held > most) {
          most = held;
          victim = session;
        }
      }
      if (!victim) break;
      WarnClose(*victim, "the store's connections hold " + SizeText(budget_->total()) +
                             ", more than the limit of " + SizeText(budget_->limit) +
                             " (--max-buffered), and this one holds the most (" + SizeText(most) +
                             ")");
      const ConnId id = victim->id();
      victim->Close();
      store_.Close(id);
      sessions_.erase(id);
      Forget(id);
    }
    shedding_ = false;
  }

  void OnSessionEnd(Session& session) override {
    log_.debug("connection {} from {} ended", session.id(), session.peer());
    const ConnId id = session.id();
    // A store proxy's streams end with its upstream, for the same reason (a node agent's
    // connection may be one of them).
    std::vector<ConnId> ended = StreamsOf(id);
    store_.Close(id);
    sessions_.erase(id);
    Forget(id);
    ended.push_back(id);
    Observe(std::move(ended), session.error());
  }

  // Posts the connection observer for connections that ended by themselves (see
  // ServerOptions::connection_observer).
  void Observe(std::vector<ConnId> ended, const std::string& why) {
    if (!options_.connection_observer || stopped_) return;
    asio::post(io_, [observer = options_.connection_observer, ended = std::move(ended), why] {
      for (ConnId id : ended) observer(id, why);
    });
  }

  std::vector<ConnId> StreamsOf(ConnId upstream) const {
    std::vector<ConnId> ids;
    if (auto it = upstreams_.find(upstream); it != upstreams_.end()) {
      for (const auto& [stream, conn] : it->second->ids) ids.push_back(conn);
    }
    return ids;
  }

  // ---- Server API ----

  Status BeginAttempt(int attempt) {
    if (stopped_) {
      return Error{
          "cannot begin restart attempt " + std::to_string(attempt) + ": the store is stopped", ""};
    }
    auto dropped = store_.BeginAttempt(attempt);
    if (!dropped.ok()) return dropped.error();
    std::size_t closed = 0;
    for (ConnId id : *dropped) {
      if (EndProxiedForAttempt(id)) {
        ++closed;
        continue;
      }
      auto it = sessions_.find(id);
      if (it == sessions_.end()) continue;
      it->second->Close();
      sessions_.erase(it);
      Forget(id);
      ++closed;
    }
    FlushPending();  // each proxy's CLOSEs in one write
    const int backlog = DrainBacklog();
    log_.info(
        "restart attempt {} begins: closed {} connections of earlier attempts and {} "
        "still waiting in the listen backlog",
        attempt, closed, backlog);
    return OkStatus();
  }

  void Stop() {
    if (stopped_) return;
    stopped_ = true;
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    retry_timer_.cancel();
    warn_timer_.cancel();
    SummarizeWarnings();
    for (auto& [id, stream] : streams_) store_.Close(id);
    streams_.clear();
    upstreams_.clear();
    auto sessions = std::move(sessions_);
    sessions_.clear();
    for (auto& [id, session] : sessions) {
      store_.Close(id);
      session->Close();
    }
    auto waits = std::move(waits_);
    waits_.clear();
    for (auto& [id, done] : waits) {
      store_.Close(id);
      asio::post(io_, [done = std::move(done)] { done(false); });
    }
    log_.debug("store stopped ({} connections closed)", sessions.size());
  }

  std::string Run(Request request, Effects& effects) {
    Reply reply;
    store_.Handle(launcher_conn_, request, reply, effects);
    Dispatch(effects, nullptr);
    return reply.Flatten();
  }

  // Node 0 writes one value under many keys (an epoch's plan, once per admitted node, which
  // made the store hold N copies of an O(N) plan): a value equal to the last one written
  // in-process is shared with it, not stored again.
  void SetInProcess(const std::string& key, const std::string& value) {
    if (!last_set_ || *last_set_ != value) last_set_ = std::make_shared<std::string>(value);
    Effects effects;
    store_.SetShared(Scope::kLauncher, key, last_set_, effects);
    Dispatch(effects, nullptr);
  }

  void AsyncWait(const std::vector<std::string>& keys, std::function<void(bool)> done) {
    if (stopped_) {
      asio::post(io_, [done = std::move(done)] { done(false); });
      return;
    }
    const ConnId id = next_id_++;
    store_.Open(id, Scope::kLauncher);
    Request request;
    request.op = Op::kWait;
    request.keys = keys;
    Reply reply;
    Effects effects;
    store_.Handle(id, request, reply, effects);
    if (!reply.empty()) {
      store_.Close(id);
      asio::post(io_, [done = std::move(done)] { done(true); });
      return;
    }
    waits_.emplace(id, std::move(done));
  }

  std::vector<int> NativeHandles() {
    std::vector<int> fds;
    if (acceptor_.is_open()) fds.push_back(acceptor_.native_handle());
    for (auto& [id, session] : sessions_) fds.push_back(session->native_handle());
    return fds;
  }

  asio::io_context& io_;
  tcp::acceptor acceptor_;
  asio::steady_timer retry_timer_;
  asio::steady_timer warn_timer_;  ///< ends the current window of warnings
  ServerOptions options_;
  spdlog::logger& log_;
  Store store_;
  std::shared_ptr<BufferBudget> budget_;  ///< shared with every session
  std::uint16_t port_;
  std::string address_;
  std::unordered_map<ConnId, std::shared_ptr<Session>> sessions_;
  std::unordered_map<ConnId, std::function<void(bool)>> waits_;  ///< in-process AsyncWaits
  ConnId next_id_ = 1;
  ConnId launcher_conn_ = 0;
  Effects effects_;                                 ///< reused by OnRequest
  std::vector<std::shared_ptr<Session>> to_flush_;  ///< Dispatch: sessions with deliveries
  std::shared_ptr<std::string> last_set_;  ///< the last value set in-process (SetInProcess)
  /// Metrics: parked requests (WAIT) by connection, measured when their reply is delivered.
  std::unordered_map<ConnId, std::pair<Op, Clock::time_point>> parked_;
  /// The agents' proof of the job secret, by connection (agent_auth.h).
  struct Auth {
    std::string nonce;    ///< the challenge last handed out; "" once answered
    bool proven = false;  ///< the connection proved the secret
  };
  std::unordered_map<ConnId, Auth> auth_;
  /// At the cap (foreign_peer): the connections whose owner was looked up, and of those the
  /// ones of another local user than the job's and root, oldest (lowest id) first.
  std::unordered_set<ConnId> classified_;
  std::set<ConnId> foreign_;
  bool stopped_ = false;
  bool shortage_logged_ = false;
  bool shedding_ = false;  ///< OnOverBudget is running
  // Rate limit of warnings about bad connections (see ServerOptions::warn_burst).
  Clock::time_point warn_window_end_{};
  std::size_t warned_ = 0;      ///< lines logged in the current window
  std::size_t suppressed_ = 0;  ///< lines not logged in the current window
  std::string last_suppressed_;
  // Store proxies (upstream.h): each upgraded session's link, and where each proxied
  // stream's store connection lives.
  struct StreamRef {
    ConnId upstream;       ///< the upgraded session
    std::uint32_t stream;  ///< the proxy's stream id
  };
  std::unordered_map<ConnId, std::unique_ptr<UpstreamLink>> upstreams_;
  std::unordered_map<ConnId, StreamRef> streams_;

  // ---- store proxies' upstream connections (upstream.h) ----

  std::size_t OnRaw(Session& session, std::span<const std::uint8_t> bytes) override {
    auto it = upstreams_.find(session.id());
    if (it == upstreams_.end()) {
      session.CloseAfterFlush("upstream bytes on a connection that is no upstream");
      return bytes.size();
    }
    UpstreamLink& link = *it->second;
    const std::size_t used = link.demux.Feed(bytes, link);
    if (link.demux.failed()) {
      session.CloseAfterFlush("broke the store proxy protocol: " + link.demux.error());
    }
    return used;
  }

  std::size_t RawBuffered(const Session& session) const override {
    auto it = upstreams_.find(session.id());
    return it == upstreams_.end() ? 0 : it->second->demux.buffered();
  }

  bool OpenStream(UpstreamLink& link, std::uint32_t stream) {
    if (streams_.size() >= options_.max_streams) {
      Warn(
          fmt::format("refusing a rank's connection through the store proxy at {}: {} proxied "
                      "connections are open, the limit is {}, more than the job's ranks open (fix: "
                      "check what connects to that node's proxy)",
                      link.session->peer(), streams_.size(), options_.max_streams));
      TellStreamClosed(link, stream);
      return false;
    }
    const ConnId id = next_id_++;
    store_.Open(id, Scope::kAttempt);
    streams_.emplace(id, StreamRef{link.session->id(), stream});
    link.ids.emplace(stream, id);
    return true;
  }

  void StreamRequest(UpstreamLink& link, std::uint32_t stream, Request& request) {
    auto it = link.ids.find(stream);
    if (it == link.ids.end()) return;
    const ConnId id = it->second;
    if (IsAuthRequest(request)) {
      Reply reply;
      AuthPeer peer{id, reply, StreamPeer(link, stream), nullptr, {}};
      HandleAuth(peer, request);
      SendStreamData(link, stream, std::move(reply));
      if (!peer.close.empty()) EndStream(link, stream, peer.close);
      return;
    }
    if (std::string refused = GuardStream(id, request); !refused.empty()) {
      EndStream(link, stream, refused);
      return;
    }
    if (options_.request_observer) options_.request_observer(id, request);
    const auto begin = options_.metrics ? Clock::now() : Clock::time_point{};
    effects_.Clear();
    Reply reply;
    store_.Handle(id, request, reply, effects_);
    if (options_.metrics) Measure(id, request.op, begin);
    if (request.op == Op::kWait && log_.should_log(spdlog::level::debug) && store_.IsParked(id)) {
      log_.debug("connection {} (stream {} of the store proxy at {}): {} parked", id, stream,
                 link.session->peer(), Describe(request));
    }
    SendStreamData(link, stream, std::move(reply));
    Dispatch(effects_, link.session.get());
    if (effects_.close()) EndStream(link, stream, effects_.close_reason);
  }

  // The proxy closed `stream` (its rank or node agent disconnected): observed like a direct
  // connection that its peer closed.
  void StreamClosedByProxy(UpstreamLink& link, std::uint32_t stream) {
    auto it = link.ids.find(stream);
    if (it == link.ids.end()) return;
    const ConnId id = it->second;
    EndStream(link, stream, "");
    Observe({id}, "");
  }

  // Node 0 ends a proxied stream (`reason` logged; "" when the proxy closed it).
  void EndStream(UpstreamLink& link, std::uint32_t stream, const std::string& reason) {
    auto it = link.ids.find(stream);
    if (it == link.ids.end()) return;
    const ConnId id = it->second;
    store_.Close(id);
    streams_.erase(id);
    parked_.erase(id);
    auth_.erase(id);
    link.ids.erase(it);
    link.demux.Forget(stream);
    if (reason.empty()) return;
    Warn(fmt::format("closing connection {} (stream {} of the store proxy at {}): {}", id, stream,
                     link.session->peer(), reason));
    TellStreamClosed(link, stream);
  }

 private:
  static void TellStreamClosed(UpstreamLink& link, std::uint32_t stream) {
    AppendFrameHeader(link.session->output(), FrameType::kClose, stream, 0);
  }

  static void SendStreamData(UpstreamLink& link, std::uint32_t stream, Reply&& bytes) {
    if (bytes.empty()) return;
    AppendFrameHeader(link.session->output(), FrameType::kData, stream, bytes.size());
    link.session->output().AppendReply(std::move(bytes));
  }

  void DeliverToStream(ConnId id, const StreamRef& ref, Reply&& bytes, Session* requester) {
    auto it = upstreams_.find(ref.upstream);
    if (it == upstreams_.end()) return;
    MeasureDelivered(id);
    SendStreamData(*it->second, ref.stream, std::move(bytes));
    if (it->second->session.get() != requester) FlushLater(it->second->session);
  }

  // A session that got deliveries is flushed once, after all of them (Dispatch): a key that
  // wakes every rank's WAIT sends each proxy's upstream one write for all its streams, not
  // one per stream.
  void FlushLater(const std::shared_ptr<Session>& session) {
    if (to_flush_.empty() || to_flush_.back() != session) to_flush_.push_back(session);
  }

  static std::string StreamPeer(const UpstreamLink& link, std::uint32_t stream) {
    return "stream " + std::to_string(stream) + " of the store proxy at " + link.session->peer();
  }

  // What the server's Guard refuses on a proxied stream, or "": as on a direct connection,
  // only a stream that proved the job secret itself (a node agent's, through its node's
  // proxy) may change launcher keys; the proxy's own proof does not count for its streams.
  std::string GuardStream(ConnId id, const Request& request) const {
    if (options_.agent_secret.empty() || !Writes(request.op) || Proven(id)) return "";
    for (const std::string& key : request.keys) {
      if (key.starts_with(kLauncherKeyPrefix)) {
        return "refused " + Describe(request) +
               ": only a node agent that proved the job secret may change gculaunch's keys "
               "(--job-secret-file)";
      }
    }
    return "";
  }

  bool Proven(ConnId id) const {
    auto it = auth_.find(id);
    return it != auth_.end() && it->second.proven;
  }

  static bool IsAuthRequest(const Request& request) {
    return std::any_of(request.keys.begin(), request.keys.end(),
                       [](const std::string& key) { return key.starts_with(kAuthKeyPrefix); });
  }

  // GET kUpstreamKey: the connection carries a store proxy's streams from now on.
  void StartUpstream(Session& session, const Auth& auth) {
    if (!options_.agent_secret.empty() && !auth.proven) {
      session.CloseAfterFlush(
          "it asked to carry other ranks' connections (a store proxy) without proving the job "
          "secret (--job-secret-file)");
      return;
    }
    auto it = sessions_.find(session.id());
    if (it == sessions_.end()) return;
    AppendBlob(session.output(), kUpstreamOk);
    store_.Close(session.id());  // no rank's connection: restart attempts keep it
    upstreams_.emplace(session.id(),
                       std::make_unique<UpstreamLink>(*this, it->second, options_.limits));
    session.Upgrade(/*paced=*/true);
    log_.info("connection {} from {} is a store proxy's upstream from now on", session.id(),
              session.peer());
  }

  // Forgets the streams of an upstream connection that ended.
  void DropUpstream(ConnId id) {
    auto it = upstreams_.find(id);
    if (it == upstreams_.end()) return;
    for (const auto& [stream, conn] : it->second->ids) {
      store_.Close(conn);
      streams_.erase(conn);
      parked_.erase(conn);
      auth_.erase(conn);
    }
    upstreams_.erase(it);
  }

  // BeginAttempt dropped store connection `id`: if it is a proxied stream, closes it at its
  // proxy (which closes the rank's connection) and returns true.
  bool EndProxiedForAttempt(ConnId id) {
    auto s = streams_.find(id);
    if (s == streams_.end()) return false;
    auto u = upstreams_.find(s->second.upstream);
    if (u == upstreams_.end()) {
      streams_.erase(s);
      return true;
    }
    const std::uint32_t stream = s->second.stream;
    EndStream(*u->second, stream, "");
    TellStreamClosed(*u->second, stream);
    FlushLater(u->second->session);
    return true;
  }

 private:
  // Logs the first warn_burst warnings of each warn_interval; counts the others and logs
  // one summary line when the interval ends.
  void Warn(std::string line) {
    const auto now = Clock::now();
    if (suppressed_ == 0 && now >= warn_window_end_) {
      warn_window_end_ = now + options_.warn_interval;
      warned_ = 0;
    }
    if (warned_ < options_.warn_burst) {
      ++warned_;
      log_.warn("{}", line);
      return;
    }
    last_suppressed_ = std::move(line);
    if (suppressed_++ > 0 || stopped_) return;
    warn_timer_.expires_at(warn_window_end_);
    warn_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (!ec) self->SummarizeWarnings();
    });
  }

  void SummarizeWarnings() {
    if (suppressed_ == 0) return;
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(options_.warn_interval);
    log_.warn(
        "{} more warnings about connections in the last {} s were not logged one by one; "
        "the last: {}",
        suppressed_, seconds.count(), last_suppressed_);
    suppressed_ = 0;
    last_suppressed_.clear();
  }

  // The server's own part of a request (section "Who may connect" of server.h): true when
  // the request was the agents' proof of the job secret, answered here, or was refused.
  bool Guard(Session& session, const Request& request) {
    bool auth_key = false;
    bool launcher_key = false;
    for (const std::string& key : request.keys) {
      if (key.starts_with(kAuthKeyPrefix)) {
        auth_key = true;
      } else if (key.starts_with(kLauncherKeyPrefix)) {
        launcher_key = true;
      }
    }
    if (auth_key) {
      AuthPeer peer{session.id(), session.output(), session.peer(), &session, {}};
      HandleAuth(peer, request);
      if (!peer.close.empty()) session.CloseAfterFlush(peer.close);
      return true;
    }
    if (options_.agent_secret.empty() || !launcher_key || !Writes(request.op)) return false;
    if (Proven(session.id())) return false;
    session.CloseAfterFlush(
        "refused " + Describe(request) +
        ": only a node agent that proved the job secret may change gculaunch's keys "
        "(--job-secret-file)");
    return true;
  }

  // Where an answer to the auth keys goes: a direct connection's output, or a proxied
  // stream's reply (a node agent that reaches node 0 through its node's store proxy proves
  // the secret over its own stream, exactly as over a connection of its own).
  struct AuthPeer {
    ConnId id;
    Reply& out;
    std::string name;     ///< the peer's address, or which proxy's stream, for log lines
    Session* upgradable;  ///< a direct connection, which may become an upstream; null on a stream
    std::string close;    ///< set: the connection is closed after `out`, for this reason
  };

  // GET gculaunch/auth/nonce, SET gculaunch/auth/proof, GET gculaunch/auth/status.
  void HandleAuth(AuthPeer& peer, const Request& request) {
    const bool one_key = request.keys.size() == 1;
    const std::string_view key = one_key ? std::string_view(request.keys[0]) : "";
    Auth& auth = auth_[peer.id];
    if (request.op == Op::kGet && key == kAuthNonceKey) {
      auth.nonce = options_.agent_secret.empty() ? "" : NewAuthNonce();
      if (!options_.agent_secret.empty() && auth.nonce.empty()) {
        // An empty nonce would tell the agent there is no secret.
        peer.close = "no random bytes for a nonce (OpenSSL RAND_bytes failed)";
        return;
      }
      AppendBlob(peer.out, auth.nonce);
      return;
    }
    if (request.op == Op::kGet && key == kUpstreamKey) {
      if (peer.upgradable != nullptr) {
        StartUpstream(*peer.upgradable, auth);
      } else {
        peer.close = "a connection through a store proxy cannot carry other connections";
      }
      return;
    }
    if (request.op == Op::kGet && key == kAuthStatusKey) {
      AppendBlob(peer.out, auth.proven ? kAuthOk : "");
      return;
    }
    if (request.op == Op::kGet && key.starts_with(kNode0ProofPrefix)) {
      ProveNodeZero(peer, key.substr(kNode0ProofPrefix.size()));
      return;
    }
    if (request.op == Op::kSet && key == kAuthProofKey && request.values.size() == 1) {
      if (options_.agent_secret.empty()) return;  // nothing to prove; the agent saw no nonce
      const std::string nonce = std::exchange(auth.nonce, "");
      if (VerifyAuthProof(options_.agent_secret, nonce, request.values[0])) {
        auth.proven = true;
        log_.debug("connection {} ({}) proved the job secret", peer.id, peer.name);
        return;
      }
      peer.close = nonce.empty()
                       ? "it sent a proof of the job secret without asking for a nonce first"
                       : "its proof of the job secret is wrong: a node whose "
                         "--job-secret-file differs from this node's, or not a gculaunch agent";
      return;
    }
    peer.close = Describe(request) + ": the keys under " + std::string(kAuthKeyPrefix) +
                 " are reserved for the node agents' proof of the job secret";
  }

  // GET gculaunch/auth/node0-proof/<agent nonce>: this node's proof that it holds the secret,
  // over the agent's nonce ("" without a secret: the agent then knows node 0 has none).
  void ProveNodeZero(AuthPeer& peer, std::string_view agent_nonce) {
    if (options_.agent_secret.empty()) {
      AppendBlob(peer.out, "");
      return;
    }
    if (!IsAgentNonce(agent_nonce)) {
      peer.close =
          "it asked for node 0's proof of the job secret over a nonce that is not 32 to 128 "
          "lower-case hex digits";
      return;
    }
    AppendBlob(peer.out, NodeZeroProof(options_.agent_secret, agent_nonce));
  }

  // A request answered at once is measured now; a parked one when its reply is delivered.
  void Measure(ConnId id, Op op, Clock::time_point begin) {
    if (store_.IsParked(id)) {
      parked_[id] = {op, begin};
      return;
    }
    options_.metrics->Operation(op, std::chrono::duration<double>(Clock::now() - begin).count());
  }

  void ArmAccept() {
    acceptor_.async_wait(tcp::acceptor::wait_read,
                         [self = shared_from_this()](const boost::system::error_code& ec) {
                           self->OnAcceptable(ec);
                         });
  }

  void OnAcceptable(const boost::system::error_code& ec) {
    if (stopped_ || ec == asio::error::operation_aborted) return;
    if (ec) {
      log_.error("waiting for store connections failed: {}; retrying in {} ms", ec.message(),
                 options_.accept_retry_delay.count());
      RetryLater();
      return;
    }
    AcceptPending();
  }

  // Accepts until the backlog is empty.  The acceptor's readiness is edge-triggered in Asio,
  // so waiting again before the backlog is drained could miss connections.
  void AcceptPending() {
    for (int n = 0; n < kAcceptBatch; ++n) {
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      const int fd = ::accept4(acceptor_.native_handle(), reinterpret_cast<sockaddr*>(&ss), &len,
                               SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        const int err = errno;
        if (err == EAGAIN || err == EWOULDBLOCK) {
          ArmAccept();
          return;
        }
        if (IsTransientAcceptError(err)) continue;
        if (IsFdShortage(err)) {
          if (!shortage_logged_) {
            log_.warn(
                "cannot accept store connections: {} ({} open); retrying every {} ms "
                "(raise the open-file limit, e.g. ulimit -n)",
                std::strerror(err), sessions_.size(), options_.accept_retry_delay.count());
            shortage_logged_ = true;
          }
        } else {
          log_.error("accepting a store connection failed: {}; retrying in {} ms",
                     std::strerror(err), options_.accept_retry_delay.count());
        }
        RetryLater();
        return;
      }
      shortage_logged_ = false;
      AddSession(fd, ss);
    }
    asio::post(io_, [self = shared_from_this()] {
      if (!self->stopped_) self->AcceptPending();
    });
  }

  void RetryLater() {
    retry_timer_.expires_after(options_.accept_retry_delay);
    retry_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (ec || self->stopped_) return;
      self->AcceptPending();
    });
  }

  // --store-allow: loopback, and the listed networks.
  bool Allowed(const sockaddr_storage& ss) const {
    if (options_.allow.empty()) return true;
    const auto [bytes, size] = AddressBytes(ss);
    if (bytes == nullptr) return false;
    if (IsLoopback(bytes, size)) return true;
    for (const Network& n : options_.allow) {
      if (Contains(n, bytes, size)) return true;
    }
    return false;
  }

  void AddSession(int fd, const sockaddr_storage& ss) {
    std::string peer = PeerText(ss);
    if (!Allowed(ss)) {
      Warn(fmt::format("refusing connection from {}: not in --store-allow", peer));
      ::close(fd);
      return;
    }
    if (sessions_.size() >= options_.max_connections && !MakeRoom(fd, peer)) {
      ::close(fd);
      return;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    tcp::socket socket(io_);
    boost::system::error_code ec;
    socket.assign(ss.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), fd, ec);
    if (ec) {
      ::close(fd);
      log_.error("cannot serve connection from {}: {}", peer, ec.message());
      return;
    }
    const ConnId id = next_id_++;
    auto session =
        std::make_shared<Session>(std::move(socket), id, std::move(peer), options_.limits, *this,
                                  log_, SessionBounds{options_.limits.max_queued, budget_});
    log_.debug("connection {} from {} (attempt {})", id, session->peer(), store_.attempt());
    sessions_.emplace(id, session);
    store_.Open(id, Scope::kAttempt);
    if (options_.metrics) options_.metrics->ConnectionAccepted();
    session->Start();
  }

  // At the cap: a new connection of another local user than the job's and root is refused;
  // any other takes the slot of the oldest such connection, if there is one.  The owners are
  // looked up only here, once per connection (an accept below the cap costs nothing more).
  bool MakeRoom(int fd, const std::string& peer) {
    const bool foreign = options_.foreign_peer && options_.foreign_peer(fd);
    if (!foreign && options_.foreign_peer) {
      ClassifySessions();
      if (!foreign_.empty()) {
        EvictForeign(*foreign_.begin(), peer);
        return true;
      }
    }
    const std::string& hint = options_.connection_cap_hint;
    Warn(fmt::format("refusing connection from {}: {} connections are open, the limit is {}{}{}",
                     peer, sessions_.size(), options_.max_connections,
                     foreign ? "; it belongs to another local user than the job's and root, "
                               "whose connections are refused first"
                             : "",
                     hint.empty() ? "" : " (fix: " + hint + ")"));
    return false;
  }

  void ClassifySessions() {
    for (auto& [id, session] : sessions_) {
      if (!classified_.insert(id).second) continue;
      if (options_.foreign_peer(session->native_handle())) foreign_.insert(id);
    }
  }

  void EvictForeign(ConnId id, const std::string& for_peer) {
    auto it = sessions_.find(id);
    if (it != sessions_.end()) {
      Warn(fmt::format(
          "closing connection {} from {}: the store holds its limit of {} connections, and "
          "this one belongs to another local user than the job's and root; its slot goes to "
          "{}",
          id, it->second->peer(), options_.max_connections, for_peer));
      it->second->Close();
      sessions_.erase(it);
    }
    store_.Close(id);
    Forget(id);
  }

  // What the server keeps about a connection besides the session and the store's state.
  void Forget(ConnId id) {
    parked_.erase(id);
    auth_.erase(id);
    classified_.erase(id);
    foreign_.erase(id);
    DropUpstream(id);  // a store proxy's upstream: its streams go with it
  }

  // Accepts and closes every connection waiting in the listen backlog; returns how many.
  int DrainBacklog() {
    int drained = 0;
    while (acceptor_.is_open()) {
      const int fd =
          ::accept4(acceptor_.native_handle(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        const int err = errno;
        if (IsTransientAcceptError(err)) continue;
        if (err != EAGAIN && err != EWOULDBLOCK) {
          log_.warn("could not empty the listen backlog for the new attempt: {}",
                    std::strerror(err));
        }
        break;
      }
      ::close(fd);
      ++drained;
    }
    return drained;
  }

  // A parked WAIT's reply is being delivered: its latency ends now.
  void MeasureDelivered(ConnId id) {
    if (auto p = parked_.find(id); p != parked_.end() && !store_.IsParked(id)) {
      const double waited = std::chrono::duration<double>(Clock::now() - p->second.second).count();
      options_.metrics->Operation(p->second.first, waited);
      parked_.erase(p);
    }
  }

  void Dispatch(Effects& effects, Session* requester) {
    for (Delivery& d : effects.deliveries) {
      if (auto w = waits_.find(d.conn); w != waits_.end()) {
        auto done = std::move(w->second);
        waits_.erase(w);
        store_.Close(d.conn);
        asio::post(io_, [done = std::move(done)] { done(true); });
        continue;
      }
      if (auto s = streams_.find(d.conn); s != streams_.end()) {
        DeliverToStream(d.conn, s->second, std::move(d.bytes), requester);
        continue;
      }
      auto it = sessions_.find(d.conn);
      if (it == sessions_.end()) continue;
      MeasureDelivered(d.conn);
      std::shared_ptr<Session> target = it->second;
      target->output().AppendReply(std::move(d.bytes));
      if (target.get() != requester) FlushLater(target);  // the requester: after its read
    }
    FlushPending();
  }

  void FlushPending() {
    if (to_flush_.empty()) return;  // every request dispatches: most deliver nothing
    // Moved out first: a flush that fails ends its session, whose end may dispatch again.
    auto flush = std::exchange(to_flush_, {});
    if (flush.size() > 1) {
      std::sort(flush.begin(), flush.end());
      flush.erase(std::unique(flush.begin(), flush.end()), flush.end());
    }
    for (const auto& session : flush) session->Flush();
  }
};

bool UpstreamLink::OnOpen(std::uint32_t stream) { return core.OpenStream(*this, stream); }
void UpstreamLink::OnRequest(std::uint32_t stream, Request& request) {
  core.StreamRequest(*this, stream, request);
}
void UpstreamLink::OnClose(std::uint32_t stream) { core.StreamClosedByProxy(*this, stream); }
void UpstreamLink::OnMalformed(std::uint32_t stream, const std::string& reason) {
  core.EndStream(*this, stream, "malformed input: " + reason);
}

Server::Server(boost::asio::io_context& io, ListenSocket listener, ServerOptions options,
               spdlog::logger& log)
    : core_(std::make_shared<ServerCore>(io, std::move(listener), std::move(options), log)) {
  core_->Start();
}

Server::~Server() { core_->Stop(); }

std::uint16_t Server::port() const { return core_->port_; }
const std::string& Server::address() const { return core_->address_; }
Status Server::BeginAttempt(int attempt) { return core_->BeginAttempt(attempt); }
int Server::attempt() const { return core_->store_.attempt(); }
void Server::Stop() { core_->Stop(); }
bool Server::stopped() const { return core_->stopped_; }

void Server::Set(const std::string& key, const std::string& value) {
  core_->SetInProcess(key, value);
}

std::optional<std::string> Server::Get(const std::string& key) const {
  const std::string* value = core_->store_.Find(Scope::kLauncher, key);
  if (value == nullptr) return std::nullopt;
  return *value;
}

Result<std::int64_t> Server::Add(const std::string& key, std::int64_t delta) {
  Effects effects;
  Request r;
  r.op = Op::kAdd;
  r.keys = {key};
  r.delta = delta;
  const std::string reply = core_->Run(std::move(r), effects);
  if (effects.close() || reply.size() != 8) {
    return Error{"ADD to launcher key '" + key + "' failed: " + effects.close_reason,
                 "store only decimal numbers in counters"};
  }
  return static_cast<std::int64_t>(LoadU64(reinterpret_cast<const std::uint8_t*>(reply.data())));
}

bool Server::Check(const std::vector<std::string>& keys) {
  Effects effects;
  Request r;
  r.op = Op::kCheck;
  r.keys = keys;
  const std::string reply = core_->Run(std::move(r), effects);
  return reply.size() == 1 && reply[0] == 0;
}

std::string Server::CompareSet(const std::string& key, const std::string& expected,
                               const std::string& desired) {
  Effects effects;
  Request r;
  r.op = Op::kCompareSet;
  r.keys = {key};
  r.values = {expected, desired};
  const std::string reply = core_->Run(std::move(r), effects);
  if (reply.size() < 8) return "";
  return reply.substr(8);
}

bool Server::DeleteKey(const std::string& key) {
  Effects effects;
  Request r;
  r.op = Op::kDeleteKey;
  r.keys = {key};
  const std::string reply = core_->Run(std::move(r), effects);
  return reply.size() == 8 && reply[0] == 1;
}

void Server::AsyncWait(const std::vector<std::string>& keys, std::function<void(bool)> done) {
  core_->AsyncWait(keys, std::move(done));
}

bool Server::KeepAlive(ConnId id, const TcpKeepAlive& keepalive) {
  // A proxied stream's host is its upstream connection's.
  if (auto stream = core_->streams_.find(id); stream != core_->streams_.end()) {
    id = stream->second.upstream;
  }
  auto it = core_->sessions_.find(id);
  if (it == core_->sessions_.end() || it->second->native_handle() < 0) return false;
  SetTcpKeepAlive(it->second->native_handle(), keepalive);
  return true;
}

std::size_t Server::num_sessions() const { return core_->sessions_.size(); }
const Store& Server::store() const { return core_->store_; }
std::vector<int> Server::NativeHandlesForTest() const { return core_->NativeHandles(); }

}  // namespace gculaunch::rendezvous
