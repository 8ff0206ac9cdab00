#include "bench/scale/sim_rank.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <random>
#include <utility>

#include "rendezvous/codec.h"

// GCC 12 reports a false -Wmismatched-new-delete where Asio's awaitable frames (allocated
// and freed by the same class-specific operators) are inlined into these coroutines.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace gculaunch::bench {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using rendezvous::Dialect;
using rendezvous::Op;
using rendezvous::Request;
using Clock = std::chrono::steady_clock;
using Ec = boost::system::error_code;

auto Nothrow(Ec& ec) { return asio::redirect_error(asio::use_awaitable, ec); }

// The reply of a GET we read: the unique id is 128 bytes; anything far larger is a bug.
constexpr std::size_t kMaxValue = 256;
// NCCL's unique id (ncclUniqueId) is 128 bytes.
constexpr std::size_t kUniqueIdSize = 128;

Request Make(Op op, std::string key = {}) {
  Request r;
  r.op = op;
  if (!key.empty()) r.keys.push_back(std::move(key));
  return r;
}

std::string AttemptPrefix(const RankSetup& s) {
  // 1.13 ranks wrap the agent's store in PrefixStore("/worker/attempt_<n>"), and TCPStore puts
  // '/' before every key: "//worker/attempt_0/default_pg/..." on the wire.
  return s.dialect == Dialect::kV1 ? "//worker/attempt_" + std::to_string(s.restart_count) : "";
}

// Whether connecting again can help: the store is not up yet, or dropped the attempt.
bool Retryable(const Ec& ec) {
  return ec == asio::error::connection_refused || ec == asio::error::connection_reset ||
         ec == asio::error::timed_out || ec == asio::error::try_again;
}

// A socket for `dst`, bound to `source` with the port left to connect() (so that one source
// address's ports are shared among destinations, IP_BIND_ADDRESS_NO_PORT).
Ec OpenBound(tcp::socket& socket, const tcp::endpoint& dst, const std::string& source) {
  Ec ec;
  const int family = dst.address().is_v6() ? AF_INET6 : AF_INET;
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Ec(errno, boost::system::system_category());
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (!source.empty() && family == AF_INET) {
    ::setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    if (::inet_pton(AF_INET, source.c_str(), &sa.sin_addr) != 1 ||
        ::bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
      const int err = errno;
      ::close(fd);
      return Ec(err == 0 ? EINVAL : err, boost::system::system_category());
    }
  }
  socket.assign(family == AF_INET6 ? tcp::v6() : tcp::v4(), fd, ec);
  if (ec) ::close(fd);
  return ec;
}

}  // namespace

double MonotonicNow() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

std::string BarrierKey(const RankSetup& s) {
  return s.dialect == Dialect::kV1 ? AttemptPrefix(s) + "/default_pg/store_based_barrier_key:1"
                                   : "/default_pg/store_based_barrier_key:0";
}

std::string UniqueIdKey(const RankSetup& s) {
  return s.dialect == Dialect::kV1 ? AttemptPrefix(s) + "/default_pg/0/0"
                                   : "/default_pg/0//cuda//0";
}

// The rank's steps as one coroutine; it holds the SimRank.  Every step returns "" or what
// went wrong.
class SimRank::Flow {
 public:
  explicit Flow(std::shared_ptr<SimRank> rank)
      : r_(std::move(rank)), rng_(static_cast<std::uint64_t>(r_->setup_.rank) + 1) {}

  asio::awaitable<void> Run() {
    std::string step = "connect";
    std::string error = co_await Connect(r_->main_);
    if (error.empty()) {
      step = "init";
      error = co_await Init();
    }
    if (error.empty()) {
      step = "barrier";
      error = co_await Barrier();
    }
    if (error.empty()) {
      r_->events_.barrier(MonotonicNow());
      step = "unique id";
      error = co_await UniqueId();
    }
    if (r_->stopped_) co_return;
    if (!error.empty()) {
      r_->events_.failed("rank " + std::to_string(r_->setup_.rank) + ": " + step + ": " + error);
      co_return;
    }
    r_->events_.uid(MonotonicNow());
  }

 private:
  asio::awaitable<std::string> Connect(tcp::socket& socket) {
    const RankSetup& s = r_->setup_;
    Ec ec;
    const auto address = asio::ip::make_address(s.store_host, ec);
    if (ec) co_return "MASTER_ADDR " + s.store_host + " is not a numeric address";
    const tcp::endpoint dst(address, s.store_port);
    const auto deadline = Clock::now() + s.connect_timeout;
    for (int attempt = 1;; ++attempt) {
      if (r_->stopped_) co_return "stopped";
      ec = OpenBound(socket, dst, s.source);
      if (ec) co_return "cannot open a socket from " + s.source + ": " + ec.message();
      co_await socket.async_connect(dst, Nothrow(ec));
      if (!ec) co_return "";
      Ec ignored;
      socket.close(ignored);
      if (!Retryable(ec) || Clock::now() >= deadline) {
        co_return "to " + s.store_host + ":" + std::to_string(s.store_port) + " from " +
            (s.source.empty() ? "any address" : s.source) + ": " + ec.message() + " (attempt " +
            std::to_string(attempt) + ")";
      }
      co_await Pause(RetryDelay(attempt));
    }
  }

  // torch 1.13 retries a refused connect every second; 2.x backs off exponentially with
  // jitter (rendezvous/client.h does the same).
  std::chrono::milliseconds RetryDelay(int attempt) {
    if (r_->setup_.dialect == Dialect::kV1) return std::chrono::milliseconds(1000);
    const int base = std::min(1000, 100 << std::min(attempt - 1, 4));
    std::uniform_int_distribution<int> jitter(base / 2, base * 3 / 2);
    return std::chrono::milliseconds(jitter(rng_));
  }

  asio::awaitable<void> Pause(std::chrono::milliseconds delay) {
    Ec ignored;
    r_->timer_.expires_after(delay);
    co_await r_->timer_.async_wait(Nothrow(ignored));
  }

  asio::awaitable<std::string> Send(const Request& request) {
    wbuf_.clear();
    rendezvous::EncodeRequest(r_->setup_.dialect, request, wbuf_);
    Ec ec;
    co_await asio::async_write(r_->main_, asio::buffer(wbuf_), Nothrow(ec));
    co_return ec ? "send " + rendezvous::Describe(request) + ": " + ec.message() : "";
  }

  asio::awaitable<std::string> Read(std::size_t n) {
    Ec ec;
    co_await asio::async_read(r_->main_, asio::buffer(buf_.data(), n), Nothrow(ec));
    co_return ec ? "read a reply: " + ec.message() : "";
  }

  asio::awaitable<std::string> Add(const std::string& key, std::int64_t delta,
                                   std::int64_t& value) {
    Request add = Make(Op::kAdd, key);
    add.delta = delta;
    std::string error = co_await Send(add);
    if (error.empty()) error = co_await Read(8);
    if (error.empty()) value = static_cast<std::int64_t>(rendezvous::LoadU64(buf_.data()));
    co_return error;
  }

  asio::awaitable<std::string> Wait(const std::string& key) {
    std::string error = co_await Send(Make(Op::kWait, key));
    if (error.empty()) error = co_await Read(1);
    if (error.empty() && buf_[0] != 0) error = "WAIT answered " + std::to_string(buf_[0]);
    co_return error;
  }

  asio::awaitable<std::string> Set(const std::string& key, std::string value) {
    Request set = Make(Op::kSet, key);
    set.values.push_back(std::move(value));
    co_return co_await Send(set);
  }

  // The store's connection handshake (2.x) and the init/ counter; then 1.13's second socket.
  asio::awaitable<std::string> Init() {
    const RankSetup& s = r_->setup_;
    if (s.dialect == Dialect::kV2) {
      Request validate = Make(Op::kValidate);
      validate.word = rendezvous::kValidateMagic;
      Request ping = Make(Op::kPing);
      ping.word = static_cast<std::uint32_t>(::getpid()) + static_cast<std::uint32_t>(s.rank);
      wbuf_.clear();
      rendezvous::EncodeRequest(Dialect::kV2, validate, wbuf_);
      rendezvous::EncodeRequest(Dialect::kV2, ping, wbuf_);
      Ec ec;
      co_await asio::async_write(r_->main_, asio::buffer(wbuf_), Nothrow(ec));
      if (ec) co_return "send VALIDATE + PING: " + ec.message();
      std::string error = co_await Read(4);
      if (!error.empty()) co_return error;
      if (static_cast<std::uint32_t>(rendezvous::LoadU64(buf_.data()) & 0xffffffffu) != ping.word) {
        co_return "PING answered with another nonce";
      }
    }
    std::int64_t count = 0;
    std::string error = co_await Add("init/", 1, count);
    if (error.empty() && s.dialect == Dialect::kV1) error = co_await Connect(r_->callback_);
    co_return error;
  }

  asio::awaitable<std::string> Barrier() {
    const RankSetup& s = r_->setup_;
    const std::string key = BarrierKey(s);
    std::int64_t count = 0;
    std::string error = co_await Add(key, 1, count);
    if (!error.empty()) co_return error;
    if (s.dialect == Dialect::kV1) {
      for (int polls = 0; count != s.world_size; ++polls) {
        if (polls >= s.max_polls) {
          co_return "the barrier counted " + std::to_string(count) + " of " +
              std::to_string(s.world_size) + " after " + std::to_string(polls) + " polls";
        }
        co_await Pause(std::chrono::milliseconds(10));
        error = co_await Add(key, 0, count);
        if (!error.empty()) co_return error;
      }
      co_return "";
    }
    error = co_await Add(key, 0, count);
    if (!error.empty()) co_return error;
    const std::string last = key + ":last_worker";
    if (count == s.world_size) error = co_await Set(last, "1");
    if (error.empty()) error = co_await Wait(last);
    co_return error;
  }

  asio::awaitable<std::string> UniqueId() {
    const std::string key = UniqueIdKey(r_->setup_);
    if (r_->setup_.rank == 0) co_return co_await Set(key, std::string(kUniqueIdSize, '\x5a'));
    std::string error = co_await Wait(key);
    if (error.empty()) error = co_await Send(Make(Op::kGet, key));
    if (error.empty()) error = co_await Read(8);
    if (!error.empty()) co_return error;
    const std::uint64_t size = rendezvous::LoadU64(buf_.data());
    if (size != kUniqueIdSize) co_return "the unique id has " + std::to_string(size) + " bytes";
    co_return co_await Read(static_cast<std::size_t>(size));
  }

  std::shared_ptr<SimRank> r_;
  std::mt19937_64 rng_;
  std::string wbuf_;
  std::array<std::uint8_t, kMaxValue> buf_{};
};

SimRank::SimRank(boost::asio::io_context& io, RankSetup setup, RankEvents events)
    : io_(io),
      setup_(std::move(setup)),
      events_(std::move(events)),
      main_(io),
      callback_(io),
      timer_(io) {}

void SimRank::Start() {
  auto flow = std::make_shared<Flow>(shared_from_this());
  asio::co_spawn(
      io_, [flow]() -> asio::awaitable<void> { co_await flow->Run(); }, asio::detached);
}

void SimRank::Stop() {
  if (stopped_) return;
  stopped_ = true;
  Ec ignored;
  main_.close(ignored);
  callback_.close(ignored);
  timer_.cancel();
}

}  // namespace gculaunch::bench
