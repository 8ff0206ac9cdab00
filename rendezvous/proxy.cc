#include "rendezvous/proxy.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "rendezvous/client.h"
#include "rendezvous/join_auth.h"
#include "rendezvous/session.h"
#include "rendezvous/upstream.h"

namespace gculaunch::rendezvous {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

constexpr ConnId kUpstreamId = 0;
constexpr int kAcceptBatch = 64;
constexpr std::chrono::milliseconds kAcceptRetry{100};
// Why a rank's connection is closed when node 0 closed its stream: logged at debug level
// only (node 0 logged the reason; a new restart attempt closes every rank's connection).
constexpr std::string_view kClosedUpstream = "node 0's store closed this connection";

}  // namespace

class ProxyCore final : public SessionOwner, public std::enable_shared_from_this<ProxyCore> {
 public:
  ProxyCore(asio::io_context& io, ListenSocket listener, ProxyOptions options, spdlog::logger& log)
      : io_(io),
        acceptor_(io),
        retry_timer_(io),
        options_(std::move(options)),
        log_(log),
        budget_(std::make_shared<BufferBudget>(options_.limits.max_buffered)),
        port_(listener.port()),
        address_(listener.address()) {
    const auto protocol = listener.family() == AF_INET6 ? tcp::v6() : tcp::v4();
    const int fd = listener.Release();
    boost::system::error_code ec;
    acceptor_.assign(protocol, fd, ec);
    if (ec) {
      ::close(fd);
      stopped_ = true;
      log_.error("store proxy: cannot serve port {}: {}", port_, ec.message());
    }
  }

  void Start() {
    if (stopped_) return;
    asio::co_spawn(io_, Connect(), asio::detached);
  }

  std::string Upstream() const {
    const std::string& h = options_.upstream_host;
    return (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" +
           std::to_string(options_.upstream_port);
  }

  // ---- SessionOwner ----

  // A rank's request: re-encoded in its own dialect, one DATA frame of its stream.
  void OnRequest(Session& session, Request& request) override {
    std::string bytes;
    const auto dialect = session.dialect();
    if (!upstream_ || !dialect || !EncodeRequest(*dialect, request, bytes)) {
      session.CloseAfterFlush("cannot forward " + Describe(request) + " to node 0's store");
      return;
    }
    Reply& out = upstream_->output();
    AppendFrameHeader(out, FrameType::kData, Stream(session), bytes.size());
    out.Append(bytes);
    ScheduleFlush();
  }

  // Node 0's frames: reply bytes go to the rank's connection as they arrive.
  std::size_t OnRaw(Session& session, std::span<const std::uint8_t> bytes) override {
    if (session.id() != kUpstreamId) return bytes.size();
    std::size_t used = 0;
    while (used < bytes.size() && !lost_) {
      const auto step = reader_.Next(bytes.subspan(used));
      used += step.consumed;
      if (step.status == FrameReader::Status::kNeedMore) break;
      if (step.status == FrameReader::Status::kBad) {
        Lose("node 0's store broke the proxy protocol: " + reader_.error());
        return bytes.size();
      }
      if (step.status == FrameReader::Status::kHeader) {
        OnFrame();
        continue;
      }
      const auto body = reader_.body();
      if (target_ && !target_->closed()) {
        target_->output().Append(
            std::string_view(reinterpret_cast<const char*>(body.data()), body.size()));
        target_->Flush();
      }
      reader_.Consume(body.size());
      used += body.size();
      if (reader_.left() == 0) target_.reset();
    }
    return lost_ ? bytes.size() : used;
  }

  void OnSessionEnd(Session& session) override {
    if (session.id() == kUpstreamId) {
      const std::string& why = session.error();
      Lose("lost the connection to node 0's store at " + Upstream() + ": " +
           (why.empty() ? "node 0 closed it" : why));
      return;
    }
    log_.debug("store proxy: rank connection {} ({}) ended", session.id(), session.peer());
    sessions_.erase(session.id());
    if (upstream_ && !lost_) {
      AppendFrameHeader(upstream_->output(), FrameType::kClose, Stream(session), 0);
      ScheduleFlush();
    }
  }

  void WarnClose(const Session& session, const std::string& reason) override {
    if (reason == kClosedUpstream) {
      log_.debug("store proxy: closing rank connection {} ({}): {}", session.id(), session.peer(),
                 reason);
      return;
    }
    log_.warn("store proxy: closing {} ({}): {}",
              session.id() == kUpstreamId ? "the upstream connection"
                                          : "rank connection " + std::to_string(session.id()),
              session.peer(), reason);
  }

  // Sheds the rank connections holding the most; the upstream only when nothing else is left.
  void OnOverBudget() override {
    if (shedding_) return;
    shedding_ = true;
    while (budget_->over() && !lost_) {
      std::shared_ptr<Session> victim;
      std::size_t most = 0;
      for (auto& [id, s] : sessions_) {
        if (!s->closed() && s->footprint() > most) {
          most = s->footprint();
          victim = s;
        }
      }
      if (!victim) {
        Lose("the proxy's buffers hold more than --max-buffered");
        break;
      }
      WarnClose(*victim,
                "the proxy's connections hold more than the limit (--max-buffered), "
                "and this one holds the most");
      const ConnId id = victim->id();
      victim->Close();
      sessions_.erase(id);
      if (upstream_) {
        AppendFrameHeader(upstream_->output(), FrameType::kClose, Stream(*victim), 0);
        ScheduleFlush();
      }
    }
    shedding_ = false;
  }

  // WhenUp's callers learn the upstream's fate: "" up, else why it is not.
  void TellWaiters(const std::string& why) {
    for (auto& done : std::exchange(waiters_, {})) {
      asio::post(io_, [done = std::move(done), why] { done(why); });
    }
  }

  void WhenUp(std::function<void(const std::string&)> done) {
    if (!lost_why_.empty()) {
      asio::post(io_, [done = std::move(done), why = lost_why_] { done(why); });
    } else if (upstream_) {
      asio::post(io_, [done = std::move(done)] { done(""); });
    } else {
      waiters_.push_back(std::move(done));
    }
  }

  void Stop() {
    if (stopped_) return;
    stopped_ = true;
    if (lost_why_.empty()) lost_why_ = "the store proxy stopped";
    TellWaiters(lost_why_);
    CloseAll();
  }

  asio::io_context& io_;
  tcp::acceptor acceptor_;
  asio::steady_timer retry_timer_;
  ProxyOptions options_;
  spdlog::logger& log_;
  std::shared_ptr<BufferBudget> budget_;
  std::uint16_t port_;
  std::string address_;
  std::shared_ptr<Session> upstream_;
  std::vector<std::function<void(const std::string&)>> waiters_;  ///< WhenUp
  std::string lost_why_;    ///< why the upstream is lost or could not be made; "" before
  int attempts_ = 0;        ///< failed attempts to reach node 0 so far
  std::string last_error_;  ///< the last one's error
  std::unordered_map<ConnId, std::shared_ptr<Session>> sessions_;  ///< rank connections
  FrameReader reader_;
  std::shared_ptr<Session> target_;  ///< the rank the current DATA frame is for
  ConnId next_id_ = 1;
  bool stopped_ = false;
  bool lost_ = false;
  bool shedding_ = false;
  bool flush_posted_ = false;
  bool shortage_logged_ = false;

 private:
  static std::uint32_t Stream(const Session& session) {
    return static_cast<std::uint32_t>(session.id());
  }

  asio::awaitable<void> Connect() {
    auto self = shared_from_this();
    ClientOptions o;
    o.host = options_.upstream_host;
    o.port = options_.upstream_port;
    o.dialect = Dialect::kV1;  // nothing on connect; the frames follow the handshake
    o.connect_timeout = options_.connect_timeout;
    o.keepalive = true;
    o.on_attempt_failed = [weak = weak_from_this()](int attempt, const std::string& why) {
      if (auto core = weak.lock()) {
        core->attempts_ = attempt;
        core->last_error_ = why;
      }
    };
    auto client = co_await Client::Connect(o);
    if (stopped_) co_return;
    if (!client.ok()) {
      Lose(client.error().what);
      co_return;
    }
    std::string why = co_await Handshake(*client);
    if (stopped_) co_return;
    if (!why.empty()) {
      Lose(why);
      co_return;
    }
    auto socket = client->TakeSocket();
    if (!socket.ok()) {
      Lose(socket.error().what);
      co_return;
    }
    upstream_ =
        std::make_shared<Session>(std::move(*socket), kUpstreamId, Upstream(), options_.limits,
                                  *this, log_, SessionBounds{options_.limits.max_queued, budget_});
    upstream_->Upgrade(/*paced=*/false);
    upstream_->Start();
    log_.info(
        "store proxy: the ranks' store connections on port {} go to node 0's store at {} "
        "over one connection",
        port_, Upstream());
    ArmAccept();
    TellWaiters("");
  }

  // The job secret's handshake (join_auth.h: node 0 proves it first), then the upgrade; ""
  // when granted, else why not.
  asio::awaitable<std::string> Handshake(Client& client) {
    // The upgrade's GET rides in the handshake's last write.  Named, not a temporary: g++ 12
    // mishandles temporaries that live across co_await.
    std::string upstream_key(kUpstreamKey);
    const JoinOutcome joined =
        co_await JoinNodeZero(client, options_.secret, std::move(upstream_key));
    if (!joined.ok()) co_return JoinRefusal(joined);
    const Result<std::string>& granted = joined.then;
    if (!granted.ok())
      co_return "node 0's store at " + Upstream() + " refused the proxy: " + granted.error().what;
    if (*granted != kUpstreamOk) {
      co_return "node 0's store at " + Upstream() +
          " does not speak the store proxy's protocol (fix: the same gculaunch on every node, "
          "or no --store-proxy)";
    }
    co_return "";
  }

  std::string JoinRefusal(const JoinOutcome& joined) const {
    const std::string at = "node 0's store at " + Upstream();
    const std::string same = " (fix: give every node the same --job-secret-file)";
    switch (joined.step) {
      case JoinStep::kOk:
        return "";
      case JoinStep::kNoAnswer:
        return at + " did not answer: " + joined.detail;
      case JoinStep::kNodeZeroHasNoSecret:
        return at + " runs without a job secret, and this node has one" + same;
      case JoinStep::kJoinerHasNoSecret:
        return at + " requires a job secret, and this node has none" + same;
      case JoinStep::kNoRandom:
        return "no random bytes to check node 0's proof of the job secret (OpenSSL RAND_bytes "
               "failed)";
      case JoinStep::kNodeZeroUnproven:
        return at + " did not prove that it holds the job secret (" + joined.detail +
               "): an older gculaunch, or not the job's node 0 (fix: the same gculaunch on "
               "every node)";
      case JoinStep::kNodeZeroWrong:
        return at +
               " failed to prove that it holds the job secret: another secret, or not the "
               "job's node 0; nothing is forwarded there" +
               same;
      case JoinStep::kRefused:
        return at + " refused this node's proof of the job secret (" + joined.detail + ")" + same;
    }
    return at + ": unknown step of the job secret's handshake";
  }

  void OnFrame() {
    const auto it = sessions_.find(reader_.stream());
    std::shared_ptr<Session> rank = it != sessions_.end() ? it->second : nullptr;
    switch (reader_.type()) {
      case FrameType::kOpen:
        Lose("node 0's store broke the proxy protocol: it sent OPEN");
        return;
      case FrameType::kData:
        target_ = reader_.left() > 0 ? rank : nullptr;
        return;
      case FrameType::kClose:
        if (rank) rank->CloseAfterFlush(std::string(kClosedUpstream));
        return;
    }
  }

  void ScheduleFlush() {
    if (flush_posted_) return;
    flush_posted_ = true;
    // One write carries every request of this turn of the loop, whichever ranks sent them.
    asio::post(io_, [self = shared_from_this()] {
      self->flush_posted_ = false;
      if (self->upstream_ && !self->lost_) self->upstream_->Flush();
    });
  }

  void Lose(const std::string& why) {
    if (lost_ || stopped_) return;
    lost_ = true;
    lost_why_ = why.empty() ? "the connection to node 0's store failed" : why;  // lost(): not ""
    TellWaiters(lost_why_);
    if (options_.on_lost) asio::post(io_, [f = options_.on_lost, why] { f(why); });
    // Without rank connections (node 0 ended the job first, say) nothing fails with it.
    log_.log(sessions_.empty() ? spdlog::level::info : spdlog::level::err,
             "store proxy: {}; closing the {} rank connections it carried and its port {} (the "
             "ranks fail as against a lost store)",
             why, sessions_.size(), port_);
    CloseAll();
  }

  void CloseAll() {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    retry_timer_.cancel();
    auto sessions = std::move(sessions_);
    sessions_.clear();
    for (auto& [id, s] : sessions) s->Close();
    target_.reset();
    if (upstream_) upstream_->Close();
  }

  void ArmAccept() {
    acceptor_.async_wait(tcp::acceptor::wait_read,
                         [self = shared_from_this()](const boost::system::error_code& ec) {
                           if (!ec && !self->stopped_ && !self->lost_) self->AcceptPending();
                         });
  }

  // Accepts until the backlog is empty (the acceptor's readiness is edge-triggered).
  void AcceptPending() {
    for (int n = 0; n < kAcceptBatch; ++n) {
      const int fd =
          ::accept4(acceptor_.native_handle(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        const int err = errno;
        if (err == EAGAIN || err == EWOULDBLOCK) {
          ArmAccept();
          return;
        }
        if (err == EINTR || err == ECONNABORTED) continue;
        if (!shortage_logged_) {
          log_.warn(
              "store proxy: cannot accept rank connections: {}; retrying every {} ms "
              "(raise the open-file limit, e.g. ulimit -n)",
              std::strerror(err), kAcceptRetry.count());
          shortage_logged_ = true;
        }
        retry_timer_.expires_after(kAcceptRetry);
        retry_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
          if (!ec && !self->stopped_ && !self->lost_) self->AcceptPending();
        });
        return;
      }
      shortage_logged_ = false;
      AddRank(fd);
    }
    asio::post(io_, [self = shared_from_this()] {
      if (!self->stopped_ && !self->lost_) self->AcceptPending();
    });
  }

  void AddRank(int fd) {
    if (sessions_.size() >= options_.max_connections ||
        next_id_ > std::numeric_limits<std::uint32_t>::max()) {
      log_.warn("store proxy: refusing a rank connection: {} are open, the limit is {}",
                sessions_.size(), options_.max_connections);
      ::close(fd);
      return;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    tcp::socket socket(io_);
    boost::system::error_code ec;
    socket.assign(acceptor_.local_endpoint(ec).protocol(), fd, ec);
    if (ec) {
      ::close(fd);
      log_.error("store proxy: cannot serve a rank connection: {}", ec.message());
      return;
    }
    const auto remote = socket.remote_endpoint(ec);
    std::string peer =
        ec ? "a local rank" : remote.address().to_string() + ":" + std::to_string(remote.port());
    const ConnId id = next_id_++;
    auto session =
        std::make_shared<Session>(std::move(socket), id, std::move(peer), options_.limits, *this,
                                  log_, SessionBounds{options_.limits.max_queued, budget_});
    sessions_.emplace(id, session);
    AppendFrameHeader(upstream_->output(), FrameType::kOpen, Stream(*session), 0);
    ScheduleFlush();
    session->Start();
  }
};

Proxy::Proxy(boost::asio::io_context& io, ListenSocket listener, ProxyOptions options,
             spdlog::logger& log)
    : core_(std::make_shared<ProxyCore>(io, std::move(listener), std::move(options), log)) {
  core_->Start();
}

Proxy::~Proxy() { core_->Stop(); }
void Proxy::Stop() { core_->Stop(); }
std::uint16_t Proxy::port() const { return core_->port_; }
std::string Proxy::upstream() const { return core_->Upstream(); }
bool Proxy::connected() const { return core_->upstream_ && !core_->lost_ && !core_->stopped_; }
std::size_t Proxy::num_connections() const { return core_->sessions_.size(); }
const std::string& Proxy::address() const { return core_->address_; }
void Proxy::WhenUp(std::function<void(const std::string&)> done) { core_->WhenUp(std::move(done)); }
bool Proxy::lost() const { return !core_->lost_why_.empty(); }
int Proxy::upstream_handle() const { return connected() ? core_->upstream_->native_handle() : -1; }
int Proxy::connect_attempts() const { return core_->attempts_; }
const std::string& Proxy::last_connect_error() const { return core_->last_error_; }

}  // namespace gculaunch::rendezvous
