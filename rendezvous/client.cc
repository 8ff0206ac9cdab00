#include "rendezvous/client.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <cstdio>
#include <cstring>

#include "base/text.h"
#include "rendezvous/listener.h"

namespace gculaunch::rendezvous {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
// Used by the co_await (a || b) below; clang-tidy 14 does not count uses of operators.
using asio::experimental::awaitable_operators::operator||;  // NOLINT(misc-unused-using-decls)
using Clock = std::chrono::steady_clock;

auto Nothrow(boost::system::error_code& ec) {
  return asio::redirect_error(asio::use_awaitable, ec);
}

std::string Endpoint(const std::string& host, std::uint16_t port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

// A TCP socket that is close-on-exec from birth (Asio's open() does not set it).
tcp::socket OpenSocket(const asio::any_io_executor& ex, const tcp& protocol,
                       boost::system::error_code& ec) {
  tcp::socket socket(ex);
  const int fd = ::socket(protocol.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    ec.assign(errno, boost::system::system_category());
    return socket;
  }
  socket.assign(protocol, fd, ec);
  if (ec) ::close(fd);
  return socket;
}

void Configure(tcp::socket& socket, const ClientOptions& o) {
  const int fd = socket.native_handle();
  const int one = 1;
  // Every request is one small write that waits for its reply: Nagle would delay each by
  // the peer's delayed ACK.
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (!o.keepalive) return;
  SetTcpKeepAlive(
      fd, TcpKeepAlive{o.keepalive_idle, o.keepalive_interval, o.keepalive_probes, o.user_timeout});
}

Request Make(Op op, std::vector<std::string> keys = {}, std::vector<std::string> values = {}) {
  Request r;
  r.op = op;
  r.keys = std::move(keys);
  r.values = std::move(values);
  return r;
}

std::vector<std::string> One(std::string s) {
  std::vector<std::string> v;
  v.push_back(std::move(s));
  return v;
}

// A handshake failure that retrying cannot fix (torch raises at once too).
constexpr const char* kFatalMark = "PING returned nonce";

}  // namespace

std::chrono::milliseconds BackoffDelay(int retry, const ClientOptions& options,
                                       std::mt19937_64& rng) {
  double base = static_cast<double>(options.initial_backoff.count());
  for (int i = 1; i < retry && base < static_cast<double>(options.max_backoff.count()); ++i) {
    base *= 2;
  }
  base = std::min(base, static_cast<double>(options.max_backoff.count()));
  // Jitter, so that the nodes of a job that lost their store together do not retry in step.
  std::uniform_real_distribution<double> jitter(0.5, 1.5);
  return std::chrono::milliseconds(static_cast<std::int64_t>(base * jitter(rng)));
}

Client::Client(tcp::socket socket, ClientOptions options)
    : socket_(std::move(socket)),
      options_(std::move(options)),
      endpoint_(Endpoint(options_.host, options_.port)),
      rbuf_(4096) {}

Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;
Client::~Client() = default;

void Client::Close() {
  broken_ = true;
  boost::system::error_code ignored;
  socket_.close(ignored);
}

Result<tcp::socket> Client::TakeSocket() {
  if (broken_ || rpos_ != rend_ || handshake_unsent_ || echo_unread_) {
    const std::string why = broken_          ? "it failed"
                            : rpos_ != rend_ ? "the store sent more than was asked"
                                             : "its handshake is unfinished";
    Close();
    return Error{
        "the connection to the store at " + endpoint_ + " cannot be handed over (" + why + ")",
        "check that the store at that address is gculaunch's"};
  }
  broken_ = true;
  return std::move(socket_);
}

std::uint16_t Client::local_port() const {
  boost::system::error_code ec;
  const auto ep = socket_.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

int Client::native_handle() { return socket_.is_open() ? socket_.native_handle() : -1; }

Client::Task<Result<Client>> Client::Connect(ClientOptions options) {
  auto ex = co_await asio::this_coro::executor;
  const auto start = Clock::now();
  const auto deadline = start + options.connect_timeout;
  std::mt19937_64 rng(options.jitter_seed != 0 ? options.jitter_seed : std::random_device{}());
  // torch's own choice of nonce; any value the server must echo would do.
  if (options.ping_nonce == 0) options.ping_nonce = static_cast<std::uint32_t>(::getpid());
  const std::string where = Endpoint(options.host, options.port);
  tcp::resolver resolver(ex);
  std::string last_error = "no attempt was made";
  int attempts = 0;
  while (true) {
    ++attempts;
    boost::system::error_code ec;
    // Resolved again on every attempt: a store that comes back may come back at another
    // address (a rescheduled pod keeps its name, not its IP).
    auto endpoints =
        co_await resolver.async_resolve(options.host, std::to_string(options.port), Nothrow(ec));
    if (ec) {
      last_error = "cannot resolve " + options.host + ": " + ec.message();
    } else {
      for (const auto& entry : endpoints) {
        tcp::socket socket = OpenSocket(ex, entry.endpoint().protocol(), ec);
        if (ec) {
          last_error = "cannot create a socket: " + ec.message();
          continue;
        }
        asio::steady_timer timer(ex);
        timer.expires_at(options.attempt_timeout.count() > 0
                             ? std::min(deadline, Clock::now() + options.attempt_timeout)
                             : deadline);
        boost::system::error_code timer_ec;
        auto done = co_await (socket.async_connect(entry.endpoint(), Nothrow(ec)) ||
                              timer.async_wait(Nothrow(timer_ec)));
        if (done.index() ==
            1) {  // this attempt's time is up: back off, do not try the next address
          last_error = "connect timed out";
          break;
        }
        if (ec) {
          last_error = ec.message();
          continue;
        }
        Configure(socket, options);
        Client client(std::move(socket), options);
        if (options.dialect == Dialect::kV2 && options.handshake_with_first_request) {
          client.handshake_unsent_ = true;
        } else if (options.dialect == Dialect::kV2) {
          Status shaken = co_await client.Handshake(deadline);
          if (!shaken.ok()) {
            if (shaken.error().what.find(kFatalMark) != std::string::npos) co_return shaken.error();
            last_error = shaken.error().what;
            continue;
          }
        }
        co_return std::move(client);
      }
    }
    if (options.on_attempt_failed) options.on_attempt_failed(attempts, last_error);
    // The last pause is cut short so that the last attempt is made at the deadline: the
    // whole time the user allowed is used, not given up a back-off step early.
    const auto now = Clock::now();
    if (now >= deadline) break;
    const auto pause =
        std::min<Clock::duration>(BackoffDelay(attempts, options, rng), deadline - now);
    asio::steady_timer sleeper(ex);
    sleeper.expires_after(pause);
    co_await sleeper.async_wait(Nothrow(ec));
  }
  co_return Error{"could not connect to the store at " + where + " after " +
                      std::to_string(attempts) + (attempts == 1 ? " attempt" : " attempts") +
                      " in " + Seconds(Clock::now() - start) + ": " + last_error,
                  "check that the store is running and that host and port (MASTER_ADDR, "
                  "MASTER_PORT) point at it"};
}

// VALIDATE and PING, appended to the write buffer: one write, as torch 2.x sends them.
void Client::EncodeHandshake() {
  Request validate = Make(Op::kValidate);
  validate.word = kValidateMagic;
  Request ping = Make(Op::kPing);
  ping.word = options_.ping_nonce;
  EncodeRequest(Dialect::kV2, validate, wbuf_);
  EncodeRequest(Dialect::kV2, ping, wbuf_);
}

Client::Task<Status> Client::Handshake(Clock::time_point deadline) {
  wbuf_.clear();
  EncodeHandshake();
  boost::system::error_code ec;
  co_await asio::async_write(socket_, asio::buffer(wbuf_), Nothrow(ec));
  if (ec) co_return Error{"handshake with " + endpoint_ + " failed: " + ec.message(), ""};
  asio::steady_timer timer(socket_.get_executor());
  timer.expires_at(deadline);
  boost::system::error_code timer_ec;
  auto done = co_await (Fill(4) || timer.async_wait(Nothrow(timer_ec)));
  if (done.index() == 1) {
    co_return Error{"handshake with " + endpoint_ + " timed out waiting for the PING reply", ""};
  }
  if (auto read_ec = std::get<0>(done)) {
    co_return Error{"handshake with " + endpoint_ + " failed: " + read_ec.message(), ""};
  }
  const std::uint32_t echoed = LoadU32(reinterpret_cast<const std::uint8_t*>(&rbuf_[rpos_]));
  rpos_ += 4;
  if (echoed != options_.ping_nonce) {
    co_return Error{std::string("handshake with ") + endpoint_ + ": " + kFatalMark + " " +
                        std::to_string(echoed) + " instead of " +
                        std::to_string(options_.ping_nonce),
                    "the server is not a TCPStore"};
  }
  co_return OkStatus();
}

Error Client::Failed(Op op, const std::string& why) {
  Close();
  return Error{std::string(OpName(op)) + " on the store at " + endpoint_ +
                   " failed: " + (failure_.empty() ? why : failure_),
               "the store closed the connection or is gone; reconnect"};
}

Client::Task<Status> Client::Send(Request request) {
  std::vector<Request> one;
  one.push_back(std::move(request));
  co_return co_await SendAll(std::move(one));
}

Client::Task<Status> Client::SendAll(std::vector<Request> requests) {
  wbuf_.clear();
  const bool handshake = handshake_unsent_;
  if (handshake) EncodeHandshake();
  for (const Request& request : requests) {
    if (broken_) {
      co_return Error{std::string(OpName(request.op)) + " on the store at " + endpoint_ +
                          ": the connection is closed",
                      "reconnect"};
    }
    if (!EncodeRequest(options_.dialect, request, wbuf_)) {
      co_return Error{std::string(OpName(request.op)) + " does not exist in the torch 1.x dialect",
                      "connect with Dialect::kV2"};
    }
  }
  boost::system::error_code ec;
  co_await asio::async_write(socket_, asio::buffer(wbuf_), Nothrow(ec));
  if (ec) co_return Failed(requests.front().op, ec.message());
  if (handshake) {
    handshake_unsent_ = false;
    echo_unread_ = true;
  }
  co_return OkStatus();
}

// Cleared only once the four bytes are in: a read cut short (a WAIT's timeout cancels it)
// leaves the echo to the next one.
Client::Task<boost::system::error_code> Client::ReadEcho() {
  if (auto ec = co_await Buffer(4)) co_return ec;
  echo_unread_ = false;
  const std::uint32_t echoed = LoadU32(reinterpret_cast<const std::uint8_t*>(&rbuf_[rpos_]));
  rpos_ += 4;
  if (echoed == options_.ping_nonce) co_return boost::system::error_code();
  failure_ = "the handshake's PING came back as " + std::to_string(echoed) + " instead of " +
             std::to_string(options_.ping_nonce) + ": the server is not a TCPStore";
  co_return make_error_code(boost::system::errc::protocol_error);
}

Client::Task<boost::system::error_code> Client::Fill(std::size_t n) {
  if (echo_unread_) {
    if (auto ec = co_await ReadEcho()) co_return ec;
  }
  co_return co_await Buffer(n);
}

Client::Task<boost::system::error_code> Client::Buffer(std::size_t n) {
  if (rend_ - rpos_ >= n) co_return boost::system::error_code();
  if (rpos_ > 0) {  // keep the unread bytes at the front, so the buffer only grows for big replies
    std::memmove(rbuf_.data(), rbuf_.data() + rpos_, rend_ - rpos_);
    rend_ -= rpos_;
    rpos_ = 0;
  }
  if (rbuf_.size() < n) rbuf_.resize(std::max(n, rbuf_.size() * 2));
  boost::system::error_code ec;
  while (rend_ < n) {
    const std::size_t got = co_await socket_.async_read_some(
        asio::buffer(rbuf_.data() + rend_, rbuf_.size() - rend_), Nothrow(ec));
    if (ec) co_return ec;
    rend_ += got;
  }
  co_return ec;
}

Client::Task<Result<std::uint8_t>> Client::ReadU8(Op op) {
  if (auto ec = co_await Fill(1)) co_return Failed(op, ec.message());
  co_return static_cast<std::uint8_t>(rbuf_[rpos_++]);
}

Client::Task<Result<std::int64_t>> Client::ReadI64(Op op) {
  if (auto ec = co_await Fill(8)) co_return Failed(op, ec.message());
  const auto value =
      static_cast<std::int64_t>(LoadU64(reinterpret_cast<const std::uint8_t*>(&rbuf_[rpos_])));
  rpos_ += 8;
  co_return value;
}

Client::Task<Result<std::string>> Client::ReadBlob(Op op) {
  if (auto ec = co_await Fill(8)) co_return Failed(op, ec.message());
  const std::uint64_t size = LoadU64(reinterpret_cast<const std::uint8_t*>(&rbuf_[rpos_]));
  // A length beyond what any server may send is a broken or hostile peer: never allocate it.
  if (size > kDefaultMaxRequestSize) {
    co_return Failed(op, "reply of " + std::to_string(size) + " bytes is implausible");
  }
  rpos_ += 8;
  if (auto ec = co_await Fill(static_cast<std::size_t>(size))) co_return Failed(op, ec.message());
  std::string value(&rbuf_[rpos_], static_cast<std::size_t>(size));
  rpos_ += static_cast<std::size_t>(size);
  co_return value;
}

Client::Task<Status> Client::Set(std::string key, std::string value) {
  Request r = Make(Op::kSet, One(std::move(key)), One(std::move(value)));
  co_return co_await Send(std::move(r));
}

Client::Task<Result<std::string>> Client::Get(std::string key) {
  Request r = Make(Op::kGet, One(std::move(key)));
  if (Status s = co_await Send(std::move(r)); !s.ok()) co_return s.error();
  co_return co_await ReadBlob(Op::kGet);
}

Client::Task<Result<std::int64_t>> Client::Add(std::string key, std::int64_t delta) {
  Request r = Make(Op::kAdd, One(std::move(key)));
  r.delta = delta;
  if (Status s = co_await Send(std::move(r)); !s.ok()) co_return s.error();
  co_return co_await ReadI64(Op::kAdd);
}

Client::Task<Result<std::string>> Client::AddThenGet(std::string add_key, std::int64_t delta,
                                                     std::string get_key) {
  std::vector<Request> both;
  both.push_back(Make(Op::kAdd, One(std::move(add_key))));
  both.back().delta = delta;
  both.push_back(Make(Op::kGet, One(std::move(get_key))));
  if (Status s = co_await SendAll(std::move(both)); !s.ok()) co_return s.error();
  if (auto n = co_await ReadI64(Op::kAdd); !n.ok()) co_return n.error();
  co_return co_await ReadBlob(Op::kGet);
}

Client::Task<std::vector<Result<std::string>>> Client::GetAll(std::vector<std::string> keys,
                                                              std::string set_key,
                                                              std::string set_value) {
  std::vector<Request> requests;
  if (!set_key.empty()) {
    requests.push_back(Make(Op::kSet, One(std::move(set_key)), One(std::move(set_value))));
  }
  const std::size_t gets = keys.size();
  for (std::string& key : keys) requests.push_back(Make(Op::kGet, One(std::move(key))));
  std::vector<Result<std::string>> values;
  values.reserve(gets);
  Status sent = co_await SendAll(std::move(requests));
  for (std::size_t i = 0; i < gets; ++i) {
    if (!sent.ok()) {
      values.emplace_back(sent.error());
      continue;
    }
    // Named, not a temporary: g++ 12 mishandles temporaries that live across co_await.
    auto value = co_await ReadBlob(Op::kGet);
    values.push_back(std::move(value));
  }
  co_return values;
}

Client::Task<Result<std::string>> Client::CompareSet(std::string key, std::string expected,
                                                     std::string desired) {
  std::vector<std::string> values;
  values.push_back(std::move(expected));
  values.push_back(std::move(desired));
  Request r = Make(Op::kCompareSet, One(std::move(key)), std::move(values));
  Status s = co_await Send(std::move(r));
  if (!s.ok()) co_return s.error();
  co_return co_await ReadBlob(Op::kCompareSet);
}

Client::Task<Status> Client::Wait(std::vector<std::string> keys) {
  Request r = Make(Op::kWait, std::move(keys));
  if (Status s = co_await Send(std::move(r)); !s.ok()) co_return s.error();
  auto byte = co_await ReadU8(Op::kWait);
  if (!byte.ok()) co_return byte.error();
  if (*byte != static_cast<std::uint8_t>(WaitResponse::kStopWaiting)) {
    co_return Failed(Op::kWait, "unexpected reply byte " + std::to_string(*byte));
  }
  co_return OkStatus();
}

Client::Task<Result<bool>> Client::Wait(std::vector<std::string> keys,
                                        std::chrono::milliseconds timeout) {
  Request r = Make(Op::kWait, std::move(keys));
  if (Status s = co_await Send(std::move(r)); !s.ok()) co_return s.error();
  asio::steady_timer timer(socket_.get_executor());
  timer.expires_after(timeout);
  boost::system::error_code timer_ec;
  auto done = co_await (Fill(1) || timer.async_wait(Nothrow(timer_ec)));
  if (done.index() == 0) {
    if (auto ec = std::get<0>(done)) co_return Failed(Op::kWait, ec.message());
    const auto byte = static_cast<std::uint8_t>(rbuf_[rpos_++]);
    if (byte != static_cast<std::uint8_t>(WaitResponse::kStopWaiting)) {
      co_return Failed(Op::kWait, "unexpected reply byte " + std::to_string(byte));
    }
    co_return true;
  }
  // torch 1.x's protocol has no CANCEL_WAIT: the STOP_WAITING byte could still come later
  // and be read as another reply, so the connection cannot be used again.
  if (options_.dialect == Dialect::kV1) {
    co_return Failed(Op::kWait, "timed out after " + std::to_string(timeout.count()) +
                                    " ms, and a torch 1.x-dialect connection cannot cancel a "
                                    "WAIT, so it was closed");
  }
  Request cancel = Make(Op::kCancelWait);
  if (Status s = co_await Send(std::move(cancel)); !s.ok()) co_return s.error();
  // STOP_WAITING may have crossed the CANCEL_WAIT on the wire; WAIT_CANCELED always follows.
  auto byte = co_await ReadU8(Op::kCancelWait);
  if (byte.ok() && *byte == static_cast<std::uint8_t>(WaitResponse::kStopWaiting)) {
    byte = co_await ReadU8(Op::kCancelWait);
  }
  if (!byte.ok()) co_return byte.error();
  if (*byte != static_cast<std::uint8_t>(WaitResponse::kWaitCanceled)) {
    co_return Failed(Op::kCancelWait, "unexpected reply byte " + std::to_string(*byte));
  }
  co_return false;
}

Client::Task<Result<bool>> Client::Check(std::vector<std::string> keys) {
  Request r = Make(Op::kCheck, std::move(keys));
  if (Status s = co_await Send(std::move(r)); !s.ok()) co_return s.error();
  auto byte = co_await ReadU8(Op::kCheck);
  if (!byte.ok()) co_return byte.error();
  co_return *byte == static_cast<std::uint8_t>(CheckResponse::kReady);
}

Client::Task<Result<bool>> Client::DeleteKey(std::string key) {
  Request r = Make(Op::kDeleteKey, One(std::move(key)));
  if (Status s = co_await Send(std::move(r)); !s.ok()) {
    co_return s.error();
  }
  auto n = co_await ReadI64(Op::kDeleteKey);
  if (!n.ok()) co_return n.error();
  co_return *n == 1;
}

Client::Task<Result<std::int64_t>> Client::NumKeys() {
  Request r = Make(Op::kGetNumKeys);
  if (Status s = co_await Send(std::move(r)); !s.ok()) co_return s.error();
  co_return co_await ReadI64(Op::kGetNumKeys);
}

// MULTI_GET, MULTI_SET and PING complete the client's set of TCPStore operations for the
// tests and benchmarks that drive the store; gculaunch itself uses none of them.
Client::Task<Result<std::vector<std::string>>> Client::MultiGet(std::vector<std::string> keys) {
  const std::size_t n = keys.size();
  Request r = Make(Op::kMultiGet, std::move(keys));
  if (Status s = co_await Send(std::move(r)); !s.ok()) {
    co_return s.error();
  }
  std::vector<std::string> values;
  values.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    auto v = co_await ReadBlob(Op::kMultiGet);
    if (!v.ok()) co_return v.error();
    values.push_back(std::move(*v));
  }
  co_return values;
}

Client::Task<Status> Client::MultiSet(std::vector<std::string> keys,
                                      std::vector<std::string> values) {
  // The request carries one count for both lists (key-value pairs): they must pair up.
  if (keys.size() != values.size()) {
    co_return Error{"MULTI_SET with " + std::to_string(keys.size()) + " keys and " +
                        std::to_string(values.size()) + " values",
                    "give one value per key"};
  }
  Request r = Make(Op::kMultiSet, std::move(keys), std::move(values));
  co_return co_await Send(std::move(r));
}

Client::Task<Status> Client::Append(std::string key, std::string value) {
  Request r = Make(Op::kAppend, One(std::move(key)), One(std::move(value)));
  co_return co_await Send(std::move(r));
}

Client::Task<Result<std::uint32_t>> Client::Ping(std::uint32_t nonce) {
  Request r = Make(Op::kPing);
  r.word = nonce;
  if (Status s = co_await Send(std::move(r)); !s.ok()) co_return s.error();
  if (auto ec = co_await Fill(4)) co_return Failed(Op::kPing, ec.message());
  const std::uint32_t value = LoadU32(reinterpret_cast<const std::uint8_t*>(&rbuf_[rpos_]));
  rpos_ += 4;
  co_return value;
}

}  // namespace gculaunch::rendezvous
