// Tests of rendezvous/client.h against the real Server on loopback port 0: every operation
// in both dialects, wait timeouts (CANCEL_WAIT in v2), connect retries with back-off, the
// error that names host, port, attempts and time, a server that appears late, a wrong PING
// echo, keepalive options, close-on-exec, and many concurrent clients.
#include "rendezvous/client.h"

#include <fcntl.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <optional>
#include <thread>

#include "tests/rendezvous/scripted_store.h"
#include "tests/rendezvous/server_test_util.h"

// GCC 12 reports a false -Wmismatched-new-delete where Asio's awaitable frames (allocated
// and freed by the same class-specific operators) are inlined into these coroutines.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace gculaunch::rendezvous {
namespace {

namespace asio = boost::asio;
using testing::ServerFixture;

// Runs one coroutine to completion on a fresh io_context in this thread.
template <typename T>
T Run(asio::awaitable<T> task) {
  asio::io_context io;
  std::optional<T> out;
  std::exception_ptr error;
  asio::co_spawn(
      io, [&]() -> asio::awaitable<void> { out.emplace(co_await std::move(task)); },
      [&](std::exception_ptr e) { error = e; });
  io.run_for(testing::kHangGuard);
  if (error) std::rethrow_exception(error);
  REQUIRE(out.has_value());
  return std::move(*out);
}

// GCC 12 coroutine pitfalls, avoided throughout this file:
//  * the array behind an initializer_list cannot live across co_await ("array used as
//    initializer"), so key lists are built by V(...);
//  * a co_await inside Catch's assertion macros may run more than once (the macros repeat
//    the expression in a short-circuited branch), so results are awaited into locals first.
template <typename... Args>
std::vector<std::string> V(const Args&... args) {
  std::vector<std::string> v;
  (v.emplace_back(args), ...);
  return v;
}

ClientOptions Options(std::uint16_t port, Dialect dialect) {
  ClientOptions o;
  o.port = port;
  o.dialect = dialect;
  o.connect_timeout = std::chrono::seconds(10);
  o.jitter_seed = 1;
  return o;
}

TEST_CASE("client: every operation against the server, v2", "[client]") {
  ServerFixture f;
  Run([&]() -> asio::awaitable<int> {
    auto c = co_await Client::Connect(Options(f.port(), Dialect::kV2));
    REQUIRE(c.ok());
    auto r1 = co_await c->Set("/k", "v");
    CHECK(r1.ok());
    auto r2 = co_await c->Get("/k");
    CHECK(*r2 == "v");
    auto r3 = co_await c->Get("/missing");
    CHECK(*r3 == "");
    auto r4 = co_await c->Add("/n", 5);
    CHECK(*r4 == 5);
    auto r5 = co_await c->Add("/n", -7);
    CHECK(*r5 == -2);
    auto r6 = co_await c->CompareSet("/k", "v", "w");
    CHECK(*r6 == "w");
    auto r7 = co_await c->CompareSet("/k", "x", "y");
    CHECK(*r7 == "w");
    auto r8 = co_await c->Check(V("/k", "/n"));
    CHECK(*r8);
    auto r9 = co_await c->Check(V("/k", "/nope"));
    CHECK_FALSE(*r9);
    auto r10 = co_await c->Wait(V("/k"));
    CHECK(r10.ok());
    auto r11 = co_await c->Wait(V("/k", "/n"), std::chrono::seconds(5));
    CHECK(*r11);
    auto r12 = co_await c->Append("/a", "12");
    CHECK(r12.ok());
    auto r13 = co_await c->Append("/a", "34");
    CHECK(r13.ok());
    auto r14 = co_await c->MultiSet(V("/m1", "/m2"), V("one", "two"));
    CHECK(r14.ok());
    auto r15 = co_await c->MultiGet(V("/m2", "/a", "/m1"));
    CHECK(*r15 == V("two", "1234", "one"));
    auto r16 = co_await c->NumKeys();
    CHECK(*r16 == 5);
    auto r17 = co_await c->DeleteKey("/m1");
    CHECK(*r17);
    auto r18 = co_await c->DeleteKey("/m1");
    CHECK_FALSE(*r18);
    auto r19 = co_await c->Ping(77);
    CHECK(*r19 == 77);
    auto r20 = co_await c->NumKeys();
    CHECK(*r20 == 4);
    CHECK_FALSE(c->broken());
    co_return 0;
  }());
}

TEST_CASE("client: an ADD and a GET pipelined in one write are answered in order", "[client]") {
  ServerFixture f;
  for (Dialect dialect : {Dialect::kV1, Dialect::kV2}) {
    Run([&]() -> asio::awaitable<int> {
      auto c = co_await Client::Connect(Options(f.port(), dialect));
      REQUIRE(c.ok());
      auto set = co_await c->Set("/k", "v");
      REQUIRE(set.ok());
      const std::string n = dialect == Dialect::kV1 ? "/n1" : "/n2";
      // The GET reads the key the ADD just wrote: the server handled them in order.
      auto same = co_await c->AddThenGet(n, 3, n);
      REQUIRE(same.ok());
      auto other = co_await c->AddThenGet(n, 2, "/k");
      REQUIRE(other.ok());
      auto count = co_await c->Add(n, 0);
      CHECK(*same == "3");
      CHECK(*other == "v");
      CHECK(*count == 5);
      CHECK_FALSE(c->broken());
      co_return 0;
    }());
  }
}

TEST_CASE("client: GETs after a SET and the deferred handshake, all in one write", "[client]") {
  // The fake answers nothing until all five requests arrived: a client that waited for the
  // PING's echo or for any reply in between would get no answer and fail.
  testing::ScriptedStore fake({{5, [](const std::vector<Request>&) {
                                  return testing::Word(4321) + testing::Blob("one") +
                                         testing::Blob("");
                                }}});
  ClientOptions o = Options(fake.port(), Dialect::kV2);
  o.ping_nonce = 4321;
  o.handshake_with_first_request = true;
  auto values = Run([&]() -> asio::awaitable<std::vector<Result<std::string>>> {
    auto c = co_await Client::Connect(o);
    REQUIRE(c.ok());
    // Named, not temporaries: g++ 12 mishandles temporaries that live across co_await.
    std::vector<std::string> keys = V("/a", "/b");
    std::string set_key = "/k";
    std::string set_value = "v";
    auto got = co_await c->GetAll(std::move(keys), std::move(set_key), std::move(set_value));
    CHECK_FALSE(c->broken());
    co_return got;
  }());
  fake.Join();
  CHECK(fake.failure().empty());
  REQUIRE(values.size() == 2);
  REQUIRE(values[0].ok());
  REQUIRE(values[1].ok());
  CHECK(*values[0] == "one");
  CHECK(values[1]->empty());
  REQUIRE(fake.received().size() == 1);
  const std::vector<Request>& sent = fake.received()[0];
  REQUIRE(sent.size() == 5);
  CHECK(sent[0].op == Op::kValidate);
  CHECK(sent[1].op == Op::kPing);
  CHECK(sent[1].word == 4321);
  CHECK(sent[2].op == Op::kSet);
  CHECK(sent[2].keys == V("/k"));
  CHECK(sent[2].values == V("v"));
  CHECK(sent[3].op == Op::kGet);
  CHECK(sent[3].keys == V("/a"));
  CHECK(sent[4].keys == V("/b"));
}

TEST_CASE("client: a deferred handshake's wrong echo fails the first request", "[client]") {
  testing::ScriptedStore fake(
      {{3, [](const std::vector<Request>&) { return testing::Word(1) + testing::Blob("value"); }}});
  ClientOptions o = Options(fake.port(), Dialect::kV2);
  o.ping_nonce = 4321;
  o.handshake_with_first_request = true;
  Run([&]() -> asio::awaitable<int> {
    auto c = co_await Client::Connect(o);
    REQUIRE(c.ok());
    auto got = co_await c->Get("/a");
    REQUIRE_FALSE(got.ok());
    CHECK_THAT(
        got.error().what,
        Catch::Contains("PING came back as 1 instead of 4321: the server is not a TCPStore"));
    CHECK(c->broken());
    co_return 0;
  }());
  fake.Join();
  CHECK(fake.failure().empty());
}

TEST_CASE("client: v1 dialect, and v2-only operations refused", "[client]") {
  ServerFixture f;
  Run([&]() -> asio::awaitable<int> {
    auto c = co_await Client::Connect(Options(f.port(), Dialect::kV1));
    REQUIRE(c.ok());
    auto r21 = co_await c->Add("init/", 1);
    CHECK(*r21 == 1);
    auto r22 = co_await c->Set("/k", "v");
    CHECK(r22.ok());
    auto r23 = co_await c->Get("/k");
    CHECK(*r23 == "v");
    auto r24 = co_await c->NumKeys();
    CHECK(*r24 == 2);
    auto append = co_await c->Append("/k", "x");
    REQUIRE_FALSE(append.ok());
    CHECK(append.error().what == "APPEND does not exist in the torch 1.x dialect");
    auto r25 = co_await c->Ping(1);
    CHECK_FALSE(r25.ok());
    auto r26 = co_await c->NumKeys();
    CHECK(*r26 == 2);  // nothing was sent: still in step
    co_return 0;
  }());
}

TEST_CASE("client: a wait timeout cancels in v2 and closes in v1", "[client]") {
  ServerFixture f;
  Run([&]() -> asio::awaitable<int> {
    auto c = co_await Client::Connect(Options(f.port(), Dialect::kV2));
    REQUIRE(c.ok());
    auto timed_out = co_await c->Wait(V("/never"), std::chrono::milliseconds(50));
    REQUIRE(timed_out.ok());
    CHECK_FALSE(*timed_out);
    auto r26 = co_await c->NumKeys();
    CHECK(*r26 == 0);  // still in step after CANCEL_WAIT
    auto set = co_await c->Set("/never", "x");
    CHECK(set.ok());
    auto r27 = co_await c->Wait(V("/never"), std::chrono::seconds(5));
    CHECK(*r27);

    auto v1 = co_await Client::Connect(Options(f.port(), Dialect::kV1));
    REQUIRE(v1.ok());
    auto gave_up = co_await v1->Wait(V("/other"), std::chrono::milliseconds(50));
    REQUIRE_FALSE(gave_up.ok());
    CHECK_THAT(gave_up.error().what, Catch::Contains("cannot cancel a WAIT"));
    CHECK(v1->broken());
    auto r28 = co_await v1->NumKeys();
    CHECK_FALSE(r28.ok());
    co_return 0;
  }());
}

TEST_CASE("client: back-off doubles up to the cap, with jitter between 0.5x and 1.5x", "[client]") {
  ClientOptions o;
  o.initial_backoff = std::chrono::milliseconds(100);
  o.max_backoff = std::chrono::milliseconds(1000);
  std::mt19937_64 rng(42);
  const std::vector<double> base = {100, 200, 400, 800, 1000, 1000, 1000};
  for (int round = 0; round < 50; ++round) {
    for (std::size_t i = 0; i < base.size(); ++i) {
      const auto d = BackoffDelay(static_cast<int>(i + 1), o, rng).count();
      CHECK(d >= base[i] * 0.5);
      CHECK(d < base[i] * 1.5);
    }
  }
  std::mt19937_64 a(7);
  std::mt19937_64 b(7);
  CHECK(BackoffDelay(3, o, a) == BackoffDelay(3, o, b));  // the seed decides the jitter
}

TEST_CASE("client: giving up names host, port, attempts and elapsed time", "[client]") {
  auto reserved = ListenSocket::Bind("127.0.0.1", 0);
  REQUIRE(reserved.ok());
  const std::uint16_t port = reserved->port();
  reserved = Error{"released", ""};  // closed: nothing listens on the port now
  ClientOptions o = Options(port, Dialect::kV2);
  o.connect_timeout = std::chrono::milliseconds(400);
  o.initial_backoff = std::chrono::milliseconds(20);
  int failures = 0;
  o.on_attempt_failed = [&](int attempt, const std::string& reason) {
    CHECK(attempt == failures + 1);
    CHECK(reason == "Connection refused");
    ++failures;
  };
  const auto started = std::chrono::steady_clock::now();
  auto c = Run(Client::Connect(o));
  // The whole connect timeout is used: the last attempt is made at the deadline.
  CHECK(std::chrono::steady_clock::now() - started >= o.connect_timeout);
  REQUIRE_FALSE(c.ok());
  const std::string what = c.error().what;
  INFO(what);
  CHECK(what.starts_with("could not connect to the store at 127.0.0.1:" + std::to_string(port) +
                         " after "));
  CHECK_THAT(what,
             Catch::Matches(".* after [0-9]+ attempts in [0-9]+\\.[0-9] s: Connection refused"));
  CHECK(failures >= 2);
  CHECK_THAT(what, Catch::Contains(" after " + std::to_string(failures) + " attempts"));
  CHECK_THAT(c.error().hint, Catch::Contains("MASTER_ADDR"));
}

TEST_CASE("client: connects once a late server starts listening", "[client]") {
  // Bound but not listening: connects are refused until the third attempt fails, then the
  // socket starts listening (the kernel completes the v1 connect; no handshake needed).
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ClientOptions o = Options(ntohs(addr.sin_port), Dialect::kV1);
  o.initial_backoff = std::chrono::milliseconds(10);
  int failures = 0;
  o.on_attempt_failed = [&](int, const std::string&) {
    if (++failures == 3) REQUIRE(::listen(fd, 4) == 0);
  };
  auto c = Run(Client::Connect(o));
  CHECK(c.ok());
  CHECK(failures == 3);
  ::close(fd);
}

TEST_CASE("client: a wrong PING echo fails at once, without retrying", "[client]") {
  auto listener = ListenSocket::Bind("127.0.0.1", 0);
  REQUIRE(listener.ok());
  const int lfd = listener->fd();
  std::thread fake([lfd] {
    pollfd p{lfd, POLLIN, 0};
    ::poll(&p, 1, 20000);
    const int conn = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    char buf[10];
    std::size_t got = 0;
    while (conn >= 0 && got < sizeof buf) {
      const ssize_t n = ::read(conn, buf + got, sizeof buf - got);
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    const char wrong[4] = {1, 2, 3, 4};
    if (conn >= 0) {
      (void)!::write(conn, wrong, 4);
      ::close(conn);
    }
  });
  ClientOptions o = Options(listener->port(), Dialect::kV2);
  o.ping_nonce = 4321;
  int failures = 0;
  o.on_attempt_failed = [&](int, const std::string&) { ++failures; };
  auto c = Run(Client::Connect(o));
  fake.join();
  REQUIRE_FALSE(c.ok());
  CHECK_THAT(c.error().what, Catch::Contains("PING returned nonce 67305985 instead of 4321"));
  CHECK(failures == 0);
}

TEST_CASE("client: keepalive options and a close-on-exec socket", "[client]") {
  ServerFixture f;
  Run([&]() -> asio::awaitable<int> {
    ClientOptions o = Options(f.port(), Dialect::kV2);
    o.keepalive = true;
    o.keepalive_idle = std::chrono::seconds(7);
    o.user_timeout = std::chrono::milliseconds(12000);
    auto c = co_await Client::Connect(o);
    REQUIRE(c.ok());
    const int fd = c->native_handle();
    int value = 0;
    socklen_t len = sizeof value;
    ::getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &value, &len);
    CHECK(value == 1);
    ::getsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &value, &len);
    CHECK(value == 7);
    unsigned timeout = 0;
    len = sizeof timeout;
    ::getsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &timeout, &len);
    CHECK(timeout == 12000);
    ::getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &value, &len);
    CHECK(value == 1);
    CHECK((::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
    co_return 0;
  }());
}

TEST_CASE("client: many concurrent clients meet at a barrier", "[client]") {
  ServerFixture f;
  constexpr int kClients = 200;
  asio::io_context io;
  int passed = 0;
  int failed = 0;
  for (int i = 0; i < kClients; ++i) {
    asio::co_spawn(
        io,
        [&, i]() -> asio::awaitable<void> {
          auto c = co_await Client::Connect(Options(f.port(), i % 2 ? Dialect::kV1 : Dialect::kV2));
          if (!c.ok()) {
            ++failed;
            co_return;
          }
          auto n = co_await c->Add("/arrived", 1);
          if (n.ok() && *n == kClients) (void)co_await c->Set("/go", "1");
          if ((co_await c->Wait(V("/go"))).ok()) {
            ++passed;
          } else {
            ++failed;
          }
        },
        [&](std::exception_ptr e) {
          if (e) ++failed;
        });
  }
  io.run_for(testing::kHangGuard);
  CHECK(failed == 0);
  CHECK(passed == kClients);
}

}  // namespace
}  // namespace gculaunch::rendezvous
