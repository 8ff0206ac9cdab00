#include "rendezvous/etcd/client.h"

#include <sys/socket.h>

#include <array>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <charconv>
#include <optional>

namespace gculaunch::etcd {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

/// What a Client and its Watches share: where to send, and the current token.
struct ClientState {
  asio::any_io_executor executor;
  ClientOptions options;
  std::size_t current = 0;  ///< index of the endpoint tried first
  std::string token;        ///< "" before the first authentication
  int authentications = 0;
};

struct Watch::Stream {
  explicit Stream(beast::tcp_stream s, std::string ep)
      : stream(std::move(s)), endpoint(std::move(ep)) {}
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  std::string endpoint;
};

namespace {

// Replies larger than this end the request: no etcd reply of a rendezvous comes near it.
constexpr std::uint64_t kBodyLimit = 64ULL << 20;
// How often in a row a watch may reopen and break at once before Next() gives up.
constexpr int kMaxReopens = 100;
constexpr std::chrono::milliseconds kReopenPause{200};

auto Nothrow(boost::system::error_code& ec) {
  return asio::redirect_error(asio::use_awaitable, ec);
}

struct HttpReply {
  unsigned status = 0;
  std::string body;
  std::string endpoint;
};

// A connected stream to `endpoint`, its socket close-on-exec from birth (Asio's open() does
// not set the flag; an assigned socket is not reopened by connect).
asio::awaitable<Result<beast::tcp_stream>> ConnectTo(const ClientState& state,
                                                     const Endpoint& endpoint) {
  const std::string name = endpoint.ToString();
  boost::system::error_code ec;
  tcp::resolver resolver(state.executor);
  auto results =
      co_await resolver.async_resolve(endpoint.host, std::to_string(endpoint.port), Nothrow(ec));
  if (ec) co_return Error{name + ": cannot resolve the host: " + ec.message(), ""};
  std::string why = "no address";
  for (const auto& entry : results) {
    const tcp protocol = entry.endpoint().protocol();
    const int fd = ::socket(protocol.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) co_return Error{name + ": socket() failed", ""};
    beast::tcp_stream stream(state.executor);
    stream.socket().assign(protocol, fd, ec);
    if (ec) co_return Error{name + ": " + ec.message(), ""};
    stream.expires_after(state.options.connect_timeout);
    co_await stream.async_connect(entry.endpoint(), Nothrow(ec));
    if (!ec) co_return std::move(stream);
    why = ec == beast::error::timeout
              ? "no answer within " + std::to_string(state.options.connect_timeout.count()) + " ms"
              : ec.message();
  }
  co_return Error{name + ": cannot connect: " + why, ""};
}

http::request<http::string_body> MakeRequest(http::verb verb, const std::string& target,
                                             const Endpoint& endpoint, std::string body,
                                             const std::string& token) {
  http::request<http::string_body> request{verb, target, 11};
  request.set(http::field::host, endpoint.ToString());
  request.set(http::field::user_agent, "gculaunch");
  if (!token.empty()) request.set(http::field::authorization, token);
  if (verb != http::verb::get) {
    request.set(http::field::content_type, "application/json");
    request.body() = std::move(body);
  }
  request.prepare_payload();
  return request;
}

// One request on one endpoint: its HTTP reply, or the transport failure as an Error.
asio::awaitable<Result<HttpReply>> Exchange(const ClientState& state, const Endpoint& endpoint,
                                            http::verb verb, const std::string& target,
                                            const std::string& body, bool with_token) {
  auto stream = co_await ConnectTo(state, endpoint);
  if (!stream.ok()) co_return stream.error();
  const std::string name = endpoint.ToString();
  stream->expires_after(state.options.request_timeout);
  auto request = MakeRequest(verb, target, endpoint, body, with_token ? state.token : "");
  boost::system::error_code ec;
  co_await http::async_write(*stream, request, Nothrow(ec));
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(kBodyLimit);
  if (!ec) co_await http::async_read(*stream, buffer, parser, Nothrow(ec));
  if (ec) {
    const std::string why =
        ec == beast::error::timeout
            ? "no reply within " + std::to_string(state.options.request_timeout.count()) + " ms"
            : ec.message();
    co_return Error{name + ": " + target + " failed: " + why, ""};
  }
  boost::system::error_code ignored;
  stream->socket().shutdown(tcp::socket::shutdown_both, ignored);
  auto& response = parser.get();
  co_return HttpReply{response.result_int(), std::move(response.body()), name};
}

// Whether an HTTP reply means "this member cannot serve now; ask another one".
bool ShouldFailOver(const HttpReply& reply) {
  if (reply.status == 502 || reply.status == 503 || reply.status == 504) return true;
  auto error = reply.status == 200 ? std::nullopt : ParseGatewayError(reply.body);
  return error && error->code == kCodeUnavailable;
}

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& part : parts) out += (out.empty() ? "" : "; ") + part;
  return out;
}

// Sends to the current endpoint, moving on to the next one on a transport failure or an
// "unavailable" answer; each endpoint once. The reply may still be an etcd error.
asio::awaitable<Result<HttpReply>> SendAnywhere(ClientState& state, http::verb verb,
                                                const std::string& target, const std::string& body,
                                                bool with_token) {
  std::vector<std::string> failures;
  const std::size_t n = state.options.endpoints.size();
  for (std::size_t tried = 0; tried < n; ++tried) {
    const Endpoint endpoint = state.options.endpoints[state.current % n];
    auto reply = co_await Exchange(state, endpoint, verb, target, body, with_token);
    if (reply.ok() && !ShouldFailOver(*reply)) co_return reply;
    failures.push_back(reply.ok() ? endpoint.ToString() + ": unavailable: " + reply->body
                                  : reply.error().what);
    state.current = (state.current + 1) % n;
  }
  co_return Error{"no etcd endpoint answered " + target + ": " + Join(failures),
                  "check that etcd runs and serves clients at these host:port addresses "
                  "(etcdctl --endpoints host:port endpoint health)"};
}

std::string HintFor(int code) {
  switch (code) {
    case kCodeUnauthenticated:
    case 7:  // permission denied
      return "check the etcd user, its password and its role's permissions";
    case 11:  // out of range: a compacted revision
      return "read the current state and continue from its revision";
    default:
      return "see the etcd member's log";
  }
}

Error Refused(const HttpReply& reply, const std::string& call) {
  auto error = ParseGatewayError(reply.body);
  if (!error) {
    return Error{"etcd at " + reply.endpoint + " answered " + call + " with HTTP " +
                     std::to_string(reply.status) + ": '" + reply.body.substr(0, 80) + "'",
                 "check that the address is an etcd 3.4 or newer client URL"};
  }
  return Error{"etcd at " + reply.endpoint + " refused " + call + ": " + error->message +
                   " (code " + std::to_string(error->code) + ")",
               HintFor(error->code)};
}

asio::awaitable<Status> Authenticate(ClientState& state) {
  auto reply =
      co_await SendAnywhere(state, http::verb::post, "/v3/auth/authenticate",
                            AuthenticateBody(state.options.user, state.options.password), false);
  if (!reply.ok()) co_return reply.error();
  if (reply->status != 200) {
    auto error = ParseGatewayError(reply->body);
    co_return Error{"etcd at " + reply->endpoint + " refused user '" + state.options.user +
                        "': " + (error ? error->message : "HTTP " + std::to_string(reply->status)),
                    "check the etcd user name and password"};
  }
  auto token = ParseAuthenticate(reply->body);
  if (!token.ok()) co_return token.error();
  state.token = std::move(*token);
  ++state.authentications;
  co_return OkStatus();
}

// One call with authentication: a token first when a user is set, and once more when etcd
// rejects the token (expired, or the member restarted and forgot it). Returns the 200 body.
// Coroutines that a non-coroutine function returns unstarted take their strings by value.
asio::awaitable<Result<std::string>> Call(ClientState& state, std::string target, std::string body,
                                          std::string call) {
  const bool auth = !state.options.user.empty();
  if (auth && state.token.empty()) {
    auto status = co_await Authenticate(state);
    if (!status.ok()) co_return status.error();
  }
  for (int round = 0;; ++round) {
    auto reply = co_await SendAnywhere(state, http::verb::post, target, body, true);
    if (!reply.ok()) co_return reply.error();
    if (reply->status == 200) co_return std::move(reply->body);
    auto error = ParseGatewayError(reply->body);
    if (auth && round == 0 && error && error->code == kCodeUnauthenticated) {
      auto status = co_await Authenticate(state);
      if (!status.ok()) co_return status.error();
      continue;
    }
    co_return Refused(*reply, call);
  }
}

template <typename T, typename Parse>
asio::awaitable<Result<T>> CallAndParse(ClientState& state, std::string target, std::string body,
                                        std::string call, Parse parse) {
  auto reply = co_await Call(state, std::move(target), std::move(body), std::move(call));
  if (!reply.ok()) co_return reply.error();
  co_return parse(*reply);
}

bool IsAuthFailure(const std::string& reason) {
  return reason.find("Unauthenticated") != std::string::npos ||
         reason.find("auth token") != std::string::npos;
}

}  // namespace

std::string Endpoint::ToString() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

Result<std::vector<Endpoint>> ParseEndpoints(std::string_view text) {
  std::vector<Endpoint> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = text.substr(start, comma - start);
    start = comma + 1;
    const std::string shown(item);
    const std::string hint =
        "give host:port pairs separated by commas, e.g. 10.0.0.1:2379,10.0.0.2:2379";
    if (item.rfind("https://", 0) == 0) {
      return Error{"etcd endpoint '" + shown + "': TLS is not supported yet",
                   "use an http:// client URL"};
    }
    if (item.rfind("http://", 0) == 0) item.remove_prefix(7);
    while (!item.empty() && item.back() == '/') item.remove_suffix(1);
    Endpoint endpoint;
    std::string_view port;
    if (!item.empty() && item.front() == '[') {
      const std::size_t close = item.find(']');
      if (close == std::string_view::npos)
        return Error{"etcd endpoint '" + shown + "': no ']'", hint};
      endpoint.host = std::string(item.substr(1, close - 1));
      if (close + 1 < item.size()) {
        if (item[close + 1] != ':') return Error{"etcd endpoint '" + shown + "': bad port", hint};
        port = item.substr(close + 2);
      }
    } else if (const std::size_t colon = item.rfind(':'); colon != std::string_view::npos) {
      endpoint.host = std::string(item.substr(0, colon));
      port = item.substr(colon + 1);
    } else {
      endpoint.host = std::string(item);
    }
    if (endpoint.host.empty()) return Error{"etcd endpoint '" + shown + "' has no host", hint};
    if (!port.empty()) {
      unsigned value = 0;
      auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
      if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
        return Error{"etcd endpoint '" + shown + "': '" + std::string(port) + "' is no port", hint};
      }
      endpoint.port = static_cast<std::uint16_t>(value);
    }
    out.push_back(std::move(endpoint));
  }
  return out;
}

Client::Client(asio::any_io_executor executor, ClientOptions options)
    : state_(std::make_shared<ClientState>(ClientState{std::move(executor), std::move(options)})) {}
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;
Client::~Client() = default;

Client::Task<Result<RangeResponse>> Client::Get(const std::string& key) {
  return Range(key, "", 0);
}

Client::Task<Result<RangeResponse>> Client::GetPrefix(const std::string& prefix) {
  return Range(prefix, PrefixEnd(prefix), 0);
}

Client::Task<Result<RangeResponse>> Client::Range(const std::string& key,
                                                  const std::string& range_end,
                                                  std::int64_t revision) {
  return CallAndParse<RangeResponse>(*state_, "/v3/kv/range", RangeBody(key, range_end, revision),
                                     "range", ParseRange);
}

Client::Task<Result<PutResponse>> Client::Put(const std::string& key, const std::string& value,
                                              std::int64_t lease) {
  return CallAndParse<PutResponse>(*state_, "/v3/kv/put", PutBody(key, value, lease), "put",
                                   ParsePut);
}

Client::Task<Result<DeleteResponse>> Client::Delete(const std::string& key) {
  return CallAndParse<DeleteResponse>(*state_, "/v3/kv/deleterange", DeleteBody(key, ""), "delete",
                                      ParseDelete);
}

Client::Task<Result<DeleteResponse>> Client::DeletePrefix(const std::string& prefix) {
  return CallAndParse<DeleteResponse>(*state_, "/v3/kv/deleterange",
                                      DeleteBody(prefix, PrefixEnd(prefix)), "delete", ParseDelete);
}

Client::Task<Result<TxnResponse>> Client::Txn(const TxnRequest& txn) {
  return CallAndParse<TxnResponse>(*state_, "/v3/kv/txn", TxnBody(txn), "txn", ParseTxn);
}

Client::Task<Result<Lease>> Client::LeaseGrant(std::int64_t ttl) {
  return CallAndParse<Lease>(*state_, "/v3/lease/grant", LeaseGrantBody(ttl), "lease grant",
                             ParseLeaseGrant);
}

Client::Task<Result<KeepAliveResponse>> Client::LeaseKeepAlive(std::int64_t id) {
  return CallAndParse<KeepAliveResponse>(*state_, "/v3/lease/keepalive", LeaseIdBody(id),
                                         "lease keepalive", ParseKeepAlive);
}

Client::Task<Status> Client::LeaseRevoke(std::int64_t id) {
  auto reply = co_await Call(*state_, "/v3/lease/revoke", LeaseIdBody(id),
                             "lease revoke of " + std::to_string(id));
  if (!reply.ok()) co_return reply.error();
  co_return OkStatus();
}

Client::Task<Result<std::int64_t>> Client::Compact(std::int64_t revision) {
  auto reply = co_await Call(*state_, "/v3/kv/compaction", CompactBody(revision),
                             "compaction to " + std::to_string(revision));
  if (!reply.ok()) co_return reply.error();
  co_return ParseHeaderRevision(*reply, "compaction");
}

Client::Task<Result<VersionInfo>> Client::Version() {
  auto reply = co_await SendAnywhere(*state_, http::verb::get, "/version", "", false);
  if (!reply.ok()) co_return reply.error();
  if (reply->status != 200) co_return Refused(*reply, "GET /version");
  co_return ParseVersion(reply->body);
}

Client::Task<Result<std::unique_ptr<Watch>>> Client::OpenWatch(WatchOptions options) {
  auto watch = std::make_unique<Watch>(state_, std::move(options));
  auto status = co_await watch->Open();
  if (!status.ok()) co_return status.error();
  co_return std::move(watch);
}

std::string Client::current_endpoint() const {
  const auto& endpoints = state_->options.endpoints;
  return endpoints[state_->current % endpoints.size()].ToString();
}

int Client::authentications() const { return state_->authentications; }

// ---- Watch ----

Watch::Watch(std::shared_ptr<ClientState> state, WatchOptions options)
    : state_(std::move(state)),
      options_(std::move(options)),
      next_revision_(options_.start_revision) {}

Watch::~Watch() = default;

std::int64_t Watch::next_revision() const { return next_revision_; }

void Watch::Disconnect() {
  if (!stream_) return;
  boost::system::error_code ignored;
  stream_->stream.socket().close(ignored);
}

void Watch::Cancel() {
  cancelled_ = true;
  Disconnect();
}

// Connects to one endpoint after another (each once) and creates the watch at
// next_revision_; returns once etcd confirmed it.
Watch::Task<Status> Watch::Open() {
  ClientState& state = *state_;
  const bool auth = !state.options.user.empty();
  if (auth && state.token.empty()) {
    auto status = co_await Authenticate(state);
    if (!status.ok()) co_return status.error();
  }
  std::vector<std::string> failures;
  const std::size_t n = state.options.endpoints.size();
  bool reauthenticated = false;
  for (std::size_t tried = 0; tried < n && !cancelled_;) {
    stream_.reset();
    pending_.clear();
    const Endpoint endpoint = state.options.endpoints[state.current % n];
    const std::string name = endpoint.ToString();
    auto connected = co_await ConnectTo(state, endpoint);
    std::string why;
    if (connected.ok()) {
      stream_ = std::make_unique<Stream>(std::move(*connected), name);
      stream_->stream.expires_after(state.options.request_timeout);
      auto request = MakeRequest(
          http::verb::post, "/v3/watch", endpoint,
          WatchCreateBody(options_.key, options_.range_end, next_revision_, options_.prev_kv),
          state.token);
      boost::system::error_code ec;
      co_await http::async_write(stream_->stream, request, Nothrow(ec));
      if (!ec)
        co_await http::async_read_header(stream_->stream, stream_->buffer, stream_->parser,
                                         Nothrow(ec));
      if (ec) {
        why = name + ": /v3/watch failed: " + ec.message();
      } else if (stream_->parser.get().result_int() != 200) {
        why = name + ": /v3/watch answered HTTP " +
              std::to_string(stream_->parser.get().result_int());
      } else {
        auto created = co_await ReadMessage();
        if (!created.ok()) {
          why = created.error().what;
        } else if (created->canceled && created->compact_revision == 0) {
          if (auth && !reauthenticated && IsAuthFailure(created->cancel_reason)) {
            reauthenticated = true;
            auto status = co_await Authenticate(state);
            if (!status.ok()) co_return status.error();
            continue;  // the same endpoint, with the new token
          }
          co_return Error{"etcd at " + name + " refused the watch: " + created->cancel_reason,
                          HintFor(kCodeUnauthenticated)};
        } else {
          if (created->compact_revision > 0) {
            stream_.reset();
            compacted_ = created->compact_revision;
          }
          if (next_revision_ == 0) next_revision_ = created->revision + 1;
          if (stream_) stream_->stream.expires_never();
          co_return OkStatus();
        }
      }
    } else {
      why = connected.error().what;
    }
    failures.push_back(why);
    stream_.reset();
    state.current = (state.current + 1) % n;
    ++tried;
  }
  if (cancelled_) co_return Error{"the watch was cancelled", ""};
  co_return Error{"no etcd endpoint accepted the watch: " + Join(failures),
                  "check that etcd runs and serves clients at these host:port addresses"};
}

// The next whole line of the stream, parsed.
Watch::Task<Result<WatchMessage>> Watch::ReadMessage() {
  std::array<char, 8192> chunk{};
  for (;;) {
    if (const std::size_t eol = pending_.find('\n'); eol != std::string::npos) {
      std::string line = pending_.substr(0, eol);
      pending_.erase(0, eol + 1);
      if (line.find_first_not_of(" \r\t") == std::string::npos) continue;
      co_return ParseWatchLine(line);
    }
    if (!stream_) co_return Error{"the watch stream is closed", ""};
    if (stream_->parser.is_done()) {
      co_return Error{"etcd at " + stream_->endpoint + " ended the watch stream", ""};
    }
    auto& body = stream_->parser.get().body();
    body.data = chunk.data();
    body.size = chunk.size();
    boost::system::error_code ec;
    co_await http::async_read_some(stream_->stream, stream_->buffer, stream_->parser, Nothrow(ec));
    if (ec == http::error::need_buffer) ec = {};
    if (ec) {
      co_return Error{"the watch stream from " + stream_->endpoint + " broke: " + ec.message(), ""};
    }
    pending_.append(chunk.data(), chunk.size() - stream_->parser.get().body().size);
    if (pending_.size() > kBodyLimit) {
      co_return Error{"etcd at " + stream_->endpoint + " sent a watch line over 64 MiB", ""};
    }
  }
}

// Reopens a broken stream at next_revision_, pausing between rounds, until
// reconnect_timeout.
Watch::Task<Status> Watch::Reopen() {
  const auto deadline = Clock::now() + options_.reconnect_timeout;
  for (;;) {
    auto status = co_await Open();
    if (status.ok() || cancelled_) co_return status;
    if (Clock::now() + kReopenPause >= deadline) {
      co_return Error{"watch on '" + options_.key + "' could not resume at revision " +
                          std::to_string(next_revision_) + " within " +
                          std::to_string(options_.reconnect_timeout.count()) +
                          " ms: " + status.error().what,
                      status.error().hint};
    }
    asio::steady_timer pause(state_->executor);
    pause.expires_after(kReopenPause);
    boost::system::error_code ignored;
    co_await pause.async_wait(Nothrow(ignored));
  }
}

Watch::Task<Result<WatchBatch>> Watch::Next() {
  for (int reopens = 0; !cancelled_;) {
    // (Named results: GCC 12 mishandles braced temporaries in co_return.)
    if (compacted_ > 0) {
      WatchBatch end;
      end.compact_revision = compacted_;
      co_return end;
    }
    if (!stream_) {
      if (++reopens > kMaxReopens) break;
      auto status = co_await Reopen();
      if (!status.ok()) co_return status.error();
      continue;
    }
    auto message = co_await ReadMessage();
    if (cancelled_) break;
    if (!message.ok()) {
      // A broken stream: reopen where the last delivered event left off.
      Disconnect();
      stream_.reset();
      pending_.clear();
      continue;
    }
    if (message->canceled) {
      if (message->compact_revision > 0) {
        compacted_ = message->compact_revision;
        continue;
      }
      if (IsAuthFailure(message->cancel_reason)) state_->token.clear();
      Disconnect();
      stream_.reset();
      pending_.clear();
      continue;
    }
    if (message->events.empty()) continue;  // progress notifications
    next_revision_ = message->events.back().kv.mod_revision + 1;
    WatchBatch batch;
    batch.events = std::move(message->events);
    co_return batch;
  }
  co_return Error{cancelled_ ? "the watch on '" + options_.key + "' was cancelled"
                             : "the watch on '" + options_.key + "' broke " +
                                   std::to_string(kMaxReopens) + " times in a row",
                  cancelled_ ? "" : "see the etcd members' logs"};
}

}  // namespace gculaunch::etcd
