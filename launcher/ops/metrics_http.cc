#include "launcher/ops/metrics_http.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string_view>
#include <unordered_set>

#include "launcher/ops/accept_backoff.h"
#include "launcher/sys/socket_owner.h"
#include "rendezvous/listener.h"

namespace gculaunch {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr std::size_t kMaxHead = 8192;
constexpr std::size_t kMaxConnections = 32;
constexpr auto kIdle = std::chrono::seconds(30);  // a keep-alive connection between requests
constexpr auto kHead = std::chrono::seconds(5);   // from a request's first byte to its end
constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace

class MetricsHttpConn;

// The acceptor and the set of live connections, shared with the pending handlers.
class MetricsHttpCore : public std::enable_shared_from_this<MetricsHttpCore> {
 public:
  MetricsHttpCore(asio::io_context& io, MetricsHttpServer::Render render,
                  MetricsHttpServer::Ready ready)
      : io_(io),
        acceptor_(io),
        render_(std::move(render)),
        ready_(std::move(ready)),
        backoff_(io, "the metrics endpoint") {}

  void Start(rendezvous::ListenSocket listener) {
    port_ = listener.port();
    const auto protocol = listener.family() == AF_INET6 ? tcp::v6() : tcp::v4();
    boost::system::error_code ec;
    acceptor_.assign(protocol, listener.Release(), ec);
    if (!ec) ArmAccept();
  }
  void Stop();
  void Forget(MetricsHttpConn* conn) { conns_.erase(conn); }
  /// At the cap: makes room for the new connection `fd` by closing the one that has waited
  /// longest for a request (an idle keep-alive one or a slow head).  A connection of another
  /// local user than the job's and root makes room only among such connections, so it never
  /// closes a scrape of the job's user or root; false when nothing may be closed.
  bool MakeRoom(int fd);
  std::string Render() const { return render_(); }
  Readiness Ready() const { return ready_(); }

  asio::io_context& io_;
  tcp::acceptor acceptor_;
  MetricsHttpServer::Render render_;
  MetricsHttpServer::Ready ready_;
  std::uint16_t port_ = 0;
  bool stopped_ = false;
  std::unordered_set<MetricsHttpConn*> conns_;
  AcceptBackoff backoff_;
  std::uint64_t next_wait_ = 1;  ///< orders the connections' waits, oldest first

 private:
  bool EvictOldestWaiting(bool foreign_only);
  void ArmAccept() {
    acceptor_.async_wait(tcp::acceptor::wait_read,
                         [self = shared_from_this()](const boost::system::error_code& ec) {
                           if (!ec && !self->stopped_) self->AcceptPending();
                         });
  }
  void AcceptPending();
};

// One client connection: read a request head, answer, repeat while keep-alive.
class MetricsHttpConn : public std::enable_shared_from_this<MetricsHttpConn> {
 public:
  MetricsHttpConn(std::shared_ptr<MetricsHttpCore> core, tcp::socket socket)
      : core_(std::move(core)), stream_(std::move(socket)) {}

  void Start() {
    core_->conns_.insert(this);
    ReadHead();
  }
  /// When it began waiting for a request (core_->next_wait_ order); 0: busy answering.
  std::uint64_t waiting_since() const { return waiting_since_; }
  /// Whether its peer is another local user's than the job's and root's; looked up once, the
  /// first time the endpoint is full (never below the cap).
  bool foreign() {
    if (!foreign_) foreign_ = sys::IsForeignLocalPeer(stream_.socket().native_handle());
    return *foreign_;
  }
  void Close() {
    boost::system::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }
  ~MetricsHttpConn() { core_->Forget(this); }

 private:
  // Between requests of a keep-alive connection: wait (kIdle) for the next one's first bytes.
  void WaitForRequest() {
    if (buffer_.size() > 0) {  // pipelined: the next head is already here
      ReadHead();
      return;
    }
    waiting_since_ = core_->next_wait_++;
    stream_.expires_after(kIdle);
    stream_.async_read_some(
        buffer_.prepare(kMaxHead),
        [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
          if (ec || self->core_->stopped_) {
            self->Close();
            return;
          }
          self->buffer_.commit(n);
          self->ReadHead();
        });
  }

  // A request head gets kHead, however slowly its bytes come.
  void ReadHead() {
    if (waiting_since_ == 0) waiting_since_ = core_->next_wait_++;
    parser_.emplace();
    parser_->header_limit(kMaxHead);
    parser_->body_limit(0);
    stream_.expires_after(kHead);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
                       self->OnRead(ec);
                     });
  }

  void OnRead(const boost::system::error_code& ec) {
    waiting_since_ = 0;
    if (ec || core_->stopped_) {
      Close();  // end of stream, timeout, a head too large or malformed: that connection ends
      return;
    }
    const auto& req = parser_->get();
    auto res = std::make_shared<http::response<http::string_body>>();
    res->version(req.version());
    res->keep_alive(req.keep_alive());
    res->set(http::field::server, "gculaunch");
    const bool head = req.method() == http::verb::head;
    Answer(req.method(), std::string_view(req.target().data(), req.target().size()), *res);
    res->prepare_payload();
    if (head) res->body().clear();  // Content-Length stays that of the body a GET gets
    stream_.expires_after(kIdle);
    http::async_write(
        stream_, *res,
        [self = shared_from_this(), res](const boost::system::error_code& wec, std::size_t) {
          if (wec || !res->keep_alive() || self->core_->stopped_) {
            self->Close();
            return;
          }
          self->WaitForRequest();
        });
  }

  // The response to `method` on `target` (its query ignored), body included.
  void Answer(http::verb method, std::string_view target,
              http::response<http::string_body>& res) const {
    if (auto q = target.find('?'); q != std::string_view::npos) target = target.substr(0, q);
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    if (method != http::verb::get && method != http::verb::head) {
      res.result(http::status::method_not_allowed);
      res.set(http::field::allow, "GET, HEAD");
      res.body() = "only GET and HEAD are served\n";
    } else if (target == "/metrics") {
      res.result(http::status::ok);
      res.set(http::field::content_type, kContentType);
      res.body() = core_->Render();
    } else if (target == "/healthz") {
      // Answered on the event loop, so an answer is the proof that the loop runs.
      res.result(http::status::ok);
      res.body() = "ok\n";
    } else if (target == "/readyz") {
      const Readiness ready = core_->Ready();
      res.result(ready.ready ? http::status::ok : http::status::service_unavailable);
      res.body() = ready.Line() + "\n";
    } else {
      res.result(http::status::not_found);
      res.body() = "not found: the metrics are at /metrics, the probes at /healthz and /readyz\n";
    }
  }

  std::shared_ptr<MetricsHttpCore> core_;
  std::uint64_t waiting_since_ = 0;
  std::optional<bool> foreign_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_{kMaxHead};
  std::optional<http::request_parser<http::empty_body>> parser_;
};

// accept4 with SOCK_CLOEXEC: no accepted fd is ever inheritable, not even for an instant.
void MetricsHttpCore::AcceptPending() {
  for (int n = 0; n < 64; ++n) {
    const int fd =
        ::accept4(acceptor_.native_handle(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      const int err = errno;
      if (err == EINTR || err == ECONNABORTED) continue;
      if (err == EAGAIN || err == EWOULDBLOCK) break;  // the backlog is empty
      // Out of descriptors, say: readiness will not come again for the clients already
      // waiting, so look again after a pause.
      backoff_.Failed(std::strerror(err), [self = shared_from_this()] {
        if (!self->stopped_) self->AcceptPending();
      });
      return;
    }
    backoff_.Succeeded();
    // Slots full: a scrape must not wait behind idle or slow clients, so the one that has
    // waited longest for a request makes room.
    if (conns_.size() >= kMaxConnections && !MakeRoom(fd)) {
      ::close(fd);
      continue;
    }
    tcp::socket socket(io_);
    boost::system::error_code ec;
    socket.assign(acceptor_.local_endpoint(ec).protocol(), fd, ec);
    if (ec) {
      ::close(fd);
      continue;
    }
    std::make_shared<MetricsHttpConn>(shared_from_this(), std::move(socket))->Start();
  }
  ArmAccept();
}

bool MetricsHttpCore::MakeRoom(int fd) {
  if (EvictOldestWaiting(true)) return true;
  return !sys::IsForeignLocalPeer(fd) && EvictOldestWaiting(false);
}

bool MetricsHttpCore::EvictOldestWaiting(bool foreign_only) {
  MetricsHttpConn* oldest = nullptr;
  for (MetricsHttpConn* c : conns_) {
    if (c->waiting_since() == 0 || (foreign_only && !c->foreign())) continue;
    if (oldest == nullptr || c->waiting_since() < oldest->waiting_since()) oldest = c;
  }
  if (oldest == nullptr) return false;
  conns_.erase(oldest);  // its slot is free now; its handlers end it
  oldest->Close();
  return true;
}

void MetricsHttpCore::Stop() {
  if (stopped_) return;
  stopped_ = true;
  backoff_.Cancel();
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  auto conns = conns_;  // Close() may end a connection, which erases itself
  for (MetricsHttpConn* c : conns) c->Close();
}

Result<rendezvous::ListenSocket> MetricsHttpServer::Bind(const std::string& addr,
                                                         std::uint16_t port) {
  auto bound = rendezvous::ListenSocket::Bind(addr, port, 64);
  if (!bound.ok()) {
    return Error{"--metrics-port " + std::to_string(port) + ": " + bound.error().what,
                 "choose a free port with --metrics-port (or stop what listens there), or "
                 "another --metrics-addr"};
  }
  return bound;
}

MetricsHttpServer::MetricsHttpServer(asio::io_context& io, rendezvous::ListenSocket socket,
                                     Render render, Ready ready)
    : core_(std::make_shared<MetricsHttpCore>(io, std::move(render), std::move(ready))) {
  core_->Start(std::move(socket));
}

MetricsHttpServer::~MetricsHttpServer() { core_->Stop(); }

std::uint16_t MetricsHttpServer::port() const { return core_->port_; }

void MetricsHttpServer::Stop() { core_->Stop(); }

void MetricsHttpServer::set_warn(AcceptBackoff::Warn warn) {
  core_->backoff_.set_warn(std::move(warn));
}

}  // namespace gculaunch
