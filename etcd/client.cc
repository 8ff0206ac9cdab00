#include "etcd/client.h"

#include <array>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/string_body.hpp>
#include <charconv>
#include <optional>

#include "base/text.h"
#include "etcd/connection.h"

// GCC 12 reports a false -Wmismatched-new-delete where Asio's awaitable frames (allocated by
// Asio's own operator new) are inlined into their callers.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

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
  /// For https:// endpoints: made at the first request (TlsReady), or why it could not be.
  std::shared_ptr<asio::ssl::context> tls;
  std::optional<Error> tls_error;
};

struct Watch::Stream {
  explicit Stream(std::unique_ptr<Connection> c, std::string ep)
      : conn(std::move(c)), endpoint(std::move(ep)) {}
  std::unique_ptr<Connection> conn;
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

// Makes the TLS context at the first request of a client with https:// endpoints (once; a
// file that cannot be read fails this and every later call). OK for http:// endpoints.
Status TlsReady(ClientState& state) {
  const auto& endpoints = state.options.endpoints;
  const bool tls = !endpoints.empty() && endpoints.front().tls;
  if (!tls) {
    if (state.options.tls.empty()) return OkStatus();
    return Error{
        "etcd TLS files are given but the endpoint " + endpoints.front().ToString() + " is http://",
        "write the endpoints as https://host:port, or drop the CA, certificate and "
        "key files"};
  }
  if (state.tls_error) return *state.tls_error;
  if (state.tls) return OkStatus();
  auto context = MakeTlsContext(state.options.tls);
  if (!context.ok()) {
    state.tls_error = context.error();
    return context.error();
  }
  state.tls = std::move(*context);
  return OkStatus();
}

// A connection to `endpoint` (TLS for https://; TlsReady() passed).
asio::awaitable<Result<std::unique_ptr<Connection>>> ConnectTo(const ClientState& state,
                                                               const Endpoint& endpoint) {
  return Connection::Open(state.executor, endpoint, state.tls.get(), state.options.connect_timeout);
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

// The hint for a request that failed after the connection was made: over TLS, etcd's
// --client-cert-auth refuses a client without a certificate only after the handshake.
std::string TransportHint(const ClientState& state, const boost::system::error_code& ec) {
  if (ec.category() != asio::error::get_ssl_category()) return "";
  if (state.options.tls.cert_file.empty()) {
    return "etcd may require a client certificate (--client-cert-auth): give the client "
           "certificate and key files";
  }
  return "check that etcd's --trusted-ca-file signed the client certificate";
}

// One request on one endpoint: its HTTP reply, or the transport failure as an Error.
asio::awaitable<Result<HttpReply>> Exchange(const ClientState& state, const Endpoint& endpoint,
                                            http::verb verb, const std::string& target,
                                            const std::string& body, bool with_token) {
  auto connected = co_await ConnectTo(state, endpoint);
  if (!connected.ok()) co_return connected.error();
  Connection& conn = **connected;
  const std::string name = endpoint.ToString();
  conn.tcp().expires_after(state.options.request_timeout);
  auto request = MakeRequest(verb, target, endpoint, body, with_token ? state.token : "");
  boost::system::error_code ec;
  co_await conn.Write(request, ec);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(kBodyLimit);
  if (!ec) co_await conn.Read(buffer, parser, ec);
  if (ec) {
    const std::string why =
        ec == beast::error::timeout
            ? "no reply within " + std::to_string(state.options.request_timeout.count()) + " ms"
            : ec.message();
    // A TLS alert after the handshake (TLS 1.3 refuses a missing client certificate here).
    const bool refused = ec.category() == asio::error::get_ssl_category();
    co_return Error{name + ": " + target + " failed: " + why, TransportHint(state, ec),
                    refused ? kRefusedExitCode : 0};
  }
  boost::system::error_code ignored;
  conn.tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
  auto& response = parser.get();
  co_return HttpReply{response.result_int(), std::move(response.body()), name};
}

// Whether an HTTP reply means "this member cannot serve now; ask another one".
bool ShouldFailOver(const HttpReply& reply) {
  if (reply.status == 502 || reply.status == 503 || reply.status == 504) return true;
  auto error = reply.status == 200 ? std::nullopt : ParseGatewayError(reply.body);
  return error && error->code == kCodeUnavailable;
}

// Sends to the current endpoint, moving on to the next one on a transport failure or an
// "unavailable" answer; each endpoint once. The reply may still be an etcd error.
asio::awaitable<Result<HttpReply>> SendAnywhere(ClientState& state, http::verb verb,
                                                const std::string& target, const std::string& body,
                                                bool with_token) {
  if (auto tls = TlsReady(state); !tls.ok()) co_return tls.error();
  std::vector<std::string> failures;
  std::string hint;         // the first specific one (TLS), else the general one below
  bool all_refused = true;  // every endpoint refused this client (kRefusedExitCode)
  const std::size_t n = state.options.endpoints.size();
  for (std::size_t tried = 0; tried < n; ++tried) {
    const Endpoint endpoint = state.options.endpoints[state.current % n];
    auto reply = co_await Exchange(state, endpoint, verb, target, body, with_token);
    if (reply.ok() && !ShouldFailOver(*reply)) co_return reply;
    failures.push_back(reply.ok() ? endpoint.ToString() + ": unavailable: " + reply->body
                                  : reply.error().what);
    if (!reply.ok() && hint.empty()) hint = reply.error().hint;
    all_refused = all_refused && !reply.ok() && reply.error().exit_code == kRefusedExitCode;
    state.current = (state.current + 1) % n;
  }
  co_return Error{"no etcd endpoint answered " + target + ": " + Join(failures, "; "),
                  !hint.empty() ? hint
                                : "check that etcd runs and serves clients at these host:port "
                                  "addresses (etcdctl --endpoints host:port endpoint health)",
                  all_refused ? kRefusedExitCode : 0};
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
  // Unauthenticated, permission denied, invalid argument (etcd's "user name is empty" for a
  // client without a user when auth is on): asking again gets the same answer.
  const bool denied = error->code == kCodeUnauthenticated || error->code == 7 || error->code == 3;
  return Error{"etcd at " + reply.endpoint + " refused " + call + ": " + error->message +
                   " (code " + std::to_string(error->code) + ")",
               HintFor(error->code), denied ? kRefusedExitCode : 0};
}

asio::awaitable<Status> Authenticate(ClientState& state) {
  auto reply =
      co_await SendAnywhere(state, http::verb::post, "/v3/auth/authenticate",
                            AuthenticateBody(state.options.user, state.options.password), false);
  if (!reply.ok()) co_return reply.error();
  if (reply->status != 200) {
    auto error = ParseGatewayError(reply->body);
    // etcd answered (failing over has passed every "unavailable"): a wrong user or
    // password, or authentication not enabled, stays so.
    co_return Error{"etcd at " + reply->endpoint + " refused user '" + state.options.user +
                        "': " + (error ? error->message : "HTTP " + std::to_string(reply->status)),
                    "check the etcd user name and password",
                    reply->status < 500 ? kRefusedExitCode : 0};
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
  std::string first_scheme;  // of the first entry, for refusing a mix
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = text.substr(start, comma - start);
    start = comma + 1;
    const std::string shown(item);
    const std::string hint =
        "give host:port pairs separated by commas, e.g. 10.0.0.1:2379,10.0.0.2:2379";
    Endpoint endpoint;
    if (item.rfind("https://", 0) == 0) {
      endpoint.tls = true;
      item.remove_prefix(8);
    } else if (item.rfind("http://", 0) == 0) {
      item.remove_prefix(7);
    }
    const std::string scheme = endpoint.tls ? "https://" : "http://";
    if (out.empty()) {
      first_scheme = scheme;
    } else if (scheme != first_scheme) {
      return Error{"etcd endpoint '" + shown + "' is " + scheme + " but '" +
                       out.front().ToString() + "' is " + first_scheme,
                   "give every endpoint the same scheme: all https:// (TLS) or all http://"};
    }
    while (!item.empty() && item.back() == '/') item.remove_suffix(1);
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

Client::Task<Result<std::int64_t>> Client::CompactForTest(std::int64_t revision) {
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
  if (stream_) stream_->conn->Close();
}

void Watch::Cancel() {
  cancelled_ = true;
  Disconnect();
}

// Connects to one endpoint after another (each once) and creates the watch at
// next_revision_; returns once etcd confirmed it.
Watch::Task<Status> Watch::Open() {
  ClientState& state = *state_;
  if (auto tls = TlsReady(state); !tls.ok()) co_return tls.error();
  const bool auth = !state.options.user.empty();
  if (auth && state.token.empty()) {
    auto status = co_await Authenticate(state);
    if (!status.ok()) co_return status.error();
  }
  std::vector<std::string> failures;
  std::string hint;  // the first specific one (TLS), else the general one below
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
      Connection& conn = *stream_->conn;
      conn.tcp().expires_after(state.options.request_timeout);
      auto request = MakeRequest(
          http::verb::post, "/v3/watch", endpoint,
          WatchCreateBody(options_.key, options_.range_end, next_revision_, options_.prev_kv),
          state.token);
      boost::system::error_code ec;
      co_await conn.Write(request, ec);
      if (!ec) co_await conn.ReadHeader(stream_->buffer, stream_->parser, ec);
      if (ec) {
        why = name + ": /v3/watch failed: " + ec.message();
        if (hint.empty()) hint = TransportHint(state, ec);
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
          if (stream_) stream_->conn->tcp().expires_never();
          co_return OkStatus();
        }
      }
    } else {
      why = connected.error().what;
      if (hint.empty()) hint = connected.error().hint;
    }
    failures.push_back(why);
    stream_.reset();
    state.current = (state.current + 1) % n;
    ++tried;
  }
  if (cancelled_) co_return Error{"the watch was cancelled", ""};
  co_return Error{"no etcd endpoint accepted the watch: " + Join(failures, "; "),
                  !hint.empty() ? hint
                                : "check that etcd runs and serves clients at these host:port "
                                  "addresses"};
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
    co_await stream_->conn->ReadSome(stream_->buffer, stream_->parser, ec);
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
