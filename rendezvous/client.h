// Client: a small TCPStore client on Boost.Asio C++20 coroutines.
//
// For gculaunch's own processes (the node agents of a multi-node job, the store benchmark) and
// for tests.  It speaks either dialect: v2 (torch 2.2+: VALIDATE + PING on every connection)
// or v1 (torch 1.x: nothing on connect).  Connect() retries refused, reset or unreachable
// connections with exponential back-off and jitter until a deadline, like PyTorch's clients
// do; when it gives up, the error names the host, the port, the number of attempts and the
// time spent.  Optionally it turns on TCP keepalive and TCP_USER_TIMEOUT, so that a vanished
// peer host is noticed within seconds (agents), not after the kernel's retransmission
// timeout.  Its socket is close-on-exec from birth.
//
//   auto client = co_await Client::Connect({.host = "node0", .port = 29500});
//   if (!client.ok()) { log(client.error().Format()); co_return; }
//   co_await client->Set("gculaunch/ready", "1");
//   auto n = co_await client->Add("gculaunch/arrived", 1);
//
// Every operation is one request and its reply, and returns a Result (no exceptions): an
// I/O error or a closed connection leaves the client broken (every later call fails at
// once).  Keys are sent as given: unlike torch's TCPStore, no '/' is put in front.
//
// Lifetime and threading: move-only; at most one operation in flight per client (as with
// torch's clients); all calls on the executor it was connected on.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "rendezvous/codec.h"

namespace gculaunch::rendezvous {

struct ClientOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 29500;
  Dialect dialect = Dialect::kV2;
  /// Deadline for connecting (all attempts and the v2 handshake together).
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(30)};
  /// The longest one TCP connect may take before the next attempt; 0: until the deadline.
  /// A host whose packets vanish (a cut link) answers no SYN, and the kernel's own SYN
  /// back-off would notice a healed link only tens of seconds late.
  std::chrono::milliseconds attempt_timeout{0};
  std::chrono::milliseconds initial_backoff{100};
  std::chrono::milliseconds max_backoff{std::chrono::seconds(2)};
  /// Seed of the back-off jitter; 0 draws one from std::random_device.
  std::uint64_t jitter_seed = 0;
  /// v2 PING nonce; 0 means this process's id (what torch sends).
  std::uint32_t ping_nonce = 0;
  /// v2: the VALIDATE and the PING leave with the first request, not on a round trip of
  /// their own, and the PING's echo is checked before the first reply: Connect returns once
  /// TCP connected.  Only for a store behind a listener that serves every connection it
  /// accepts (a node's store proxy, whose streams would otherwise each cost node 0 one more
  /// reply): a handshake that fails is then the first request's error, never retried.
  bool handshake_with_first_request = false;
  /// TCP keepalive + TCP_USER_TIMEOUT, for long-lived agent connections.
  bool keepalive = false;
  std::chrono::seconds keepalive_idle{5};
  std::chrono::seconds keepalive_interval{2};
  int keepalive_probes = 3;
  std::chrono::milliseconds user_timeout{std::chrono::seconds(15)};
  /// Called after each failed connection attempt with its number and reason (logging).
  std::function<void(int attempt, const std::string& reason)> on_attempt_failed;
};

/// The pause before retry number `retry` (1 = after the first failure):
/// min(initial * 2^(retry-1), max) times a jitter factor drawn uniformly from [0.5, 1.5).
std::chrono::milliseconds BackoffDelay(int retry, const ClientOptions& options,
                                       std::mt19937_64& rng);

class Client {
 public:
  template <typename T>
  using Task = boost::asio::awaitable<T>;

  /// Connects (with retries) on the calling coroutine's executor.
  static Task<Result<Client>> Connect(ClientOptions options);

  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  Task<Status> Set(std::string key, std::string value);
  /// GET as sent on the wire: no implicit WAIT (a missing key reads as empty on gculaunch's
  /// store; torch's servers close the connection).
  Task<Result<std::string>> Get(std::string key);
  Task<Result<std::int64_t>> Add(std::string key, std::int64_t delta);
  /// ADD `add_key` and GET `get_key` pipelined: both requests in one write, so the store reads
  /// them together and answers them in one write.  Returns the GET's value (the ADD's count
  /// is dropped).  A node's heartbeat reads what it polls this way (agent_link.h).
  Task<Result<std::string>> AddThenGet(std::string add_key, std::int64_t delta,
                                       std::string get_key);
  /// GETs `keys` pipelined: every request in one write, so the store reads them together and
  /// answers them in one write.  With `set_key` not empty, a SET of `set_key` = `set_value`
  /// leads the same write.  One result per key, in order; once one read fails, so does every
  /// later one.  The job secret's handshake saves its round trips this way (join_auth.h).
  Task<std::vector<Result<std::string>>> GetAll(std::vector<std::string> keys,
                                                std::string set_key = {},
                                                std::string set_value = {});
  Task<Result<std::string>> CompareSet(std::string key, std::string expected, std::string desired);
  /// Blocks until every key exists.
  Task<Status> Wait(std::vector<std::string> keys);
  /// Like Wait, but gives up after `timeout` and returns false.  v2 cancels the WAIT with
  /// CANCEL_WAIT and stays usable; v1 has no way to cancel, so the connection is closed and
  /// an error is returned instead.
  Task<Result<bool>> Wait(std::vector<std::string> keys, std::chrono::milliseconds timeout);
  Task<Result<bool>> Check(std::vector<std::string> keys);
  Task<Result<bool>> DeleteKey(std::string key);
  Task<Result<std::int64_t>> NumKeys();
  // v2 only (an error on a v1 connection):
  Task<Result<std::vector<std::string>>> MultiGet(std::vector<std::string> keys);
  Task<Status> MultiSet(std::vector<std::string> keys, std::vector<std::string> values);
  Task<Status> Append(std::string key, std::string value);
  Task<Result<std::uint32_t>> Ping(std::uint32_t nonce);

  void Close();
  /// Hands the connected socket over (a store proxy's upstream, upstream.h, then speaks its
  /// own frames on it) and leaves the client broken.  Fails, closing the socket, when bytes
  /// the store sent are still unread or the client is broken.
  Result<boost::asio::ip::tcp::socket> TakeSocket();
  bool broken() const { return broken_; }
  /// "host:port" of the store, for messages.
  const std::string& endpoint() const { return endpoint_; }
  std::uint16_t local_port() const;
  int native_handle();

 private:
  Client(boost::asio::ip::tcp::socket socket, ClientOptions options);

  Task<Status> Handshake(std::chrono::steady_clock::time_point deadline);
  void EncodeHandshake();
  /// The deferred handshake's PING echo (handshake_with_first_request), before any reply.
  Task<boost::system::error_code> ReadEcho();
  Task<Status> Send(Request request);
  /// Sends `requests` in one write.
  Task<Status> SendAll(std::vector<Request> requests);
  /// Reads until n bytes of the reply are buffered, after a deferred handshake's echo; an
  /// error code on failure (the caller decides).
  Task<boost::system::error_code> Fill(std::size_t n);
  /// Reads until n bytes are buffered, whatever they are.
  Task<boost::system::error_code> Buffer(std::size_t n);
  Task<Result<std::string>> ReadBlob(Op op);
  Task<Result<std::int64_t>> ReadI64(Op op);
  Task<Result<std::uint8_t>> ReadU8(Op op);
  Error Failed(Op op, const std::string& why);

  boost::asio::ip::tcp::socket socket_;
  ClientOptions options_;
  std::string endpoint_;
  std::string wbuf_;
  std::vector<char> rbuf_;
  std::size_t rpos_ = 0;  ///< first unread byte in rbuf_
  std::size_t rend_ = 0;  ///< end of the buffered bytes
  bool broken_ = false;
  /// handshake_with_first_request: the VALIDATE and PING are still to be sent (leading the
  /// next write), then their echo is still to be read (before the next reply).
  bool handshake_unsent_ = false;
  bool echo_unread_ = false;
  std::string failure_;  ///< why the connection broke, when the socket's error does not say
};

}  // namespace gculaunch::rendezvous
