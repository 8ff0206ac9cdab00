// Tests of rendezvous/proxy.h against a real Server on loopback: every rank connection goes
// through one upstream connection, and each operation answers as the store answers it
// directly (both dialects, a blocking WAIT that stalls no one else, CANCEL_WAIT, WATCH_KEY
// events, a store-side close, an unknown code), a rank's disconnect ends its parked WAIT,
// a new restart attempt and a lost upstream close the ranks' connections, the job secret is
// proven, and the store's connection cap counts proxied ranks.
#include "rendezvous/proxy.h"

#include <boost/asio/executor_work_guard.hpp>
#include <catch2/catch.hpp>

#include "rendezvous/upstream.h"
#include "tests/rendezvous/decode_util.h"
#include "tests/rendezvous/server_test_util.h"

namespace gculaunch::rendezvous {
namespace {

using testing::CaptureSink;
using testing::FromHex;
using testing::kHandshake;
using testing::RawClient;
using testing::Req;
using testing::ServerFixture;
using testing::ToHex;
using testing::V1;
using testing::V2;

std::int64_t AsI64(const std::string& bytes) {
  return static_cast<std::int64_t>(LoadU64(reinterpret_cast<const std::uint8_t*>(bytes.data())));
}

// A Server (node 0) and a Proxy in front of it, both on the fixture's io thread.
class ProxyFixture {
 public:
  explicit ProxyFixture(ServerOptions server_options = {}, std::string secret = "",
                        bool wait_connected = true)
      : node0(std::move(server_options)), work_(node0.io().get_executor()) {
    sink_ = std::make_shared<CaptureSink>();
    log_ = std::make_unique<spdlog::logger>("proxy-test", sink_);
    log_->set_level(spdlog::level::debug);
    auto listener = ListenSocket::Bind("127.0.0.1", 0);
    REQUIRE(listener.ok());
    ProxyOptions options;
    options.upstream_host = "127.0.0.1";
    options.upstream_port = node0.port();
    options.secret = std::move(secret);
    options.connect_timeout = std::chrono::seconds(10);
    options.on_lost = [this](const std::string& why) {
      std::lock_guard<std::mutex> lock(mu_);
      lost_ = why;
    };
    node0.OnIo([&] {
      proxy_ = std::make_unique<Proxy>(node0.io(), std::move(*listener), std::move(options), *log_);
      return 0;
    });
    if (wait_connected) REQUIRE(log().WaitFor({"over one connection"}));
  }
  ~ProxyFixture() {
    node0.OnIo([&] {
      proxy_.reset();
      return 0;
    });
    work_.reset();
  }
  std::uint16_t port() {
    return node0.OnIo([&] { return proxy_->port(); });
  }
  CaptureSink& log() { return *sink_; }
  std::size_t node0_sessions() {
    return node0.OnIo([&] { return node0.server().num_sessions(); });
  }
  std::size_t ranks() {
    return node0.OnIo([&] { return proxy_->num_connections(); });
  }
  std::string lost() {
    node0.OnIo([] { return 0; });  // on_lost is posted: let it run first
    std::lock_guard<std::mutex> lock(mu_);
    return lost_;
  }

  ServerFixture node0;

 private:
  // Keeps the io thread running after node 0's store stopped (a lost upstream).
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::shared_ptr<CaptureSink> sink_;
  std::unique_ptr<spdlog::logger> log_;
  std::unique_ptr<Proxy> proxy_;
  std::mutex mu_;
  std::string lost_;
};

TEST_CASE("proxy: both dialects through one upstream connection", "[proxy]") {
  ProxyFixture f;
  RawClient v1(f.port());
  RawClient v2(f.port());
  RawClient direct(f.node0.port());
  v1.Send(V1(Req(Op::kAdd, {"init/"}, {}, 1)));
  CHECK(AsI64(v1.Read(8)) == 1);
  v2.Send(kHandshake + V2(Req(Op::kPing, {}, {}, 0, 4321)));
  CHECK(ToHex(v2.Read(4)) == "e1100000");
  v2.Send(V2(Req(Op::kAdd, {"init/"}, {}, 1)));
  CHECK(AsI64(v2.Read(8)) == 2);
  direct.Send(V1(Req(Op::kAdd, {"init/"}, {}, 1)));
  CHECK(AsI64(direct.Read(8)) == 3);
  // Pipelined: SET + GET + GETNUMKEYS + PING + MULTI_GET + APPEND + COMPARE_SET + DELETE_KEY.
  v2.Send(V2(Req(Op::kSet, {"/p"}, {"p"})) + V2(Req(Op::kGet, {"/p"})) + V2(Req(Op::kGetNumKeys)) +
          V2(Req(Op::kPing, {}, {}, 0, 7)) + V2(Req(Op::kMultiGet, {"/p", "init/"})) +
          V2(Req(Op::kAppend, {"/p"}, {"q"})) + V2(Req(Op::kCompareSet, {"/p"}, {"pq", "r"})) +
          V2(Req(Op::kDeleteKey, {"/p"})));
  CHECK(ToHex(v2.Read(9 + 8 + 4)) ==
        "010000000000000070"
        "0200000000000000"
        "07000000");
  CHECK(v2.Read(9 + 9) == FromHex("010000000000000070") + FromHex("0100000000000000") + "3");
  CHECK(v2.Read(9) == FromHex("0100000000000000") + "r");
  CHECK(AsI64(v2.Read(8)) == 1);
  // Queues (2.8+): a QUEUE_POP on an empty queue answers as the store does.
  v2.Send(V2(Req(Op::kQueuePush, {"/q"}, {"x"})) + V2(Req(Op::kQueueLen, {"/q"})));
  CHECK(AsI64(v2.Read(8)) == 1);
  // Node 0 sees the upstream and the direct connection: not one per proxied rank.
  CHECK(f.node0_sessions() == 2);
  CHECK(f.ranks() == 2);
}

TEST_CASE("proxy: one rank's blocking WAIT stalls no other rank", "[proxy]") {
  ProxyFixture f;
  RawClient waiter(f.port());
  RawClient v2waiter(f.port());
  RawClient other(f.port());
  waiter.Send(V1(Req(Op::kWait, {"/k"})));
  f.node0.WaitForRequest(Op::kWait);
  v2waiter.Send(kHandshake + V2(Req(Op::kWait, {"/k", "/j"})));
  f.node0.WaitForRequest(Op::kWait, 2);
  for (int i = 0; i < 3; ++i) {
    other.Send(V1(Req(Op::kGet, {"/absent"})));
    CHECK(other.Read(8) == FromHex("0000000000000000"));
  }
  CHECK(waiter.NothingPending());
  other.Send(V1(Req(Op::kSet, {"/k"}, {"v"})));
  CHECK(ToHex(waiter.Read(1)) == "00");  // STOP_WAITING
  CHECK(v2waiter.NothingPending());      // still waits for /j
  other.Send(V1(Req(Op::kSet, {"/j"}, {"v"})));
  CHECK(ToHex(v2waiter.Read(1)) == "00");
}

TEST_CASE("proxy: CANCEL_WAIT, and a rank's disconnect ends its parked WAIT", "[proxy]") {
  ProxyFixture f;
  RawClient v2(f.port());
  v2.Send(kHandshake + V2(Req(Op::kWait, {"/never"})));
  f.node0.WaitForRequest(Op::kWait);
  v2.Send(V2(Req(Op::kCancelWait)));
  CHECK(ToHex(v2.Read(1)) == "01");  // WAIT_CANCELED
  CHECK(v2.NothingPending());
  {
    RawClient gone(f.port());
    gone.Send(V1(Req(Op::kWait, {"/never"})));
    const ConnId id = f.node0.WaitForRequest(Op::kWait, 2);
    REQUIRE(f.node0.OnIo([&] { return f.node0.server().store().IsParked(id); }));
  }
  // The rank is gone: the proxy sends its stream's CLOSE before any later request, so once
  // a later request was answered node 0 has forgotten the stream and its WAIT.
  REQUIRE(f.log().WaitFor({"store proxy: rank connection", "ended"}));
  v2.Send(V2(Req(Op::kGetNumKeys)));
  CHECK(AsI64(v2.Read(8)) == 0);
  const ConnId id = f.node0.WaitForRequest(Op::kWait, 2);
  CHECK_FALSE(f.node0.OnIo([&] { return f.node0.server().store().IsOpenForTest(id); }));
}

TEST_CASE("proxy: a 1.x callback connection gets WATCH_KEY events", "[proxy]") {
  ProxyFixture f;
  RawClient watcher(f.port());
  RawClient setter(f.port());
  watcher.Send(V1(Req(Op::kWatchKey, {"/w"})));
  CHECK(ToHex(watcher.Read(1)) == "03");  // KEY_CALLBACK_REGISTERED
  setter.Send(V1(Req(Op::kSet, {"/w"}, {"new"})));
  // KEY_CREATED, key, old (empty), new
  CHECK(watcher.Read(1 + 10 + 8 + 11) == FromHex("01") + FromHex("0200000000000000") + "/w" +
                                             FromHex("0000000000000000") +
                                             FromHex("0300000000000000") + "new");
}

TEST_CASE("proxy: what the store closes, or the proxy cannot parse, closes that rank only",
          "[proxy]") {
  ProxyFixture f;
  RawClient waiter(f.port());
  waiter.Send(V1(Req(Op::kWait, {"/k"})));
  f.node0.WaitForRequest(Op::kWait);
  RawClient nan(f.port());
  nan.Send(V1(Req(Op::kSet, {"/nan"}, {"abc"})) + V1(Req(Op::kAdd, {"/nan"}, {}, 1)));
  CHECK(nan.ReadsEof());
  CHECK(f.node0.log().WaitFor({"closing connection", "store proxy", "not a number"}));
  RawClient garbage(f.port());
  garbage.Send(FromHex("0909000000000000002f7768617465766572"));
  CHECK(garbage.ReadsEof());
  CHECK(f.log().WaitFor({"store proxy: closing rank connection", "unknown query code 0x09"}));
  RawClient setter(f.port());
  setter.Send(V1(Req(Op::kSet, {"/k"}, {"v"})));
  CHECK(ToHex(waiter.Read(1)) == "00");
}

TEST_CASE("proxy: a new restart attempt closes the proxied ranks' connections",
          "[proxy][attempt]") {
  ProxyFixture f;
  RawClient old_rank(f.port());
  old_rank.Send(V1(Req(Op::kSet, {"/x"}, {"old"})) + V1(Req(Op::kGetNumKeys)));
  CHECK(AsI64(old_rank.Read(8)) == 1);
  REQUIRE(f.node0.OnIo([&] { return f.node0.server().BeginAttempt(1).ok(); }));
  CHECK(old_rank.ReadsEof());
  RawClient fresh(f.port());  // the upstream survived the attempt
  fresh.Send(V1(Req(Op::kGetNumKeys)));
  CHECK(AsI64(fresh.Read(8)) == 0);
  CHECK(f.node0_sessions() == 1);
}

TEST_CASE("proxy: a lost upstream closes every rank's connection", "[proxy]") {
  ProxyFixture f;
  RawClient a(f.port());
  RawClient b(f.port());
  a.Send(V1(Req(Op::kWait, {"/never"})));
  f.node0.WaitForRequest(Op::kWait);
  b.Send(V1(Req(Op::kGetNumKeys)));
  CHECK(AsI64(b.Read(8)) == 0);
  f.node0.OnIo([&] {
    f.node0.server().Stop();
    return 0;
  });
  CHECK(a.ReadsEof());
  CHECK(b.ReadsEof());
  CHECK(f.log().WaitFor({"store proxy: lost the connection to node 0's store"}));
  CHECK_THAT(f.lost(), Catch::Contains("lost the connection"));
}

TEST_CASE("proxy: the job secret is proven before the upstream is granted", "[proxy][secret]") {
  ServerOptions options;
  options.agent_secret = "s3cret";
  SECTION("the right secret") {
    ProxyFixture f(options, "s3cret");
    RawClient rank(f.port());
    rank.Send(V1(Req(Op::kAdd, {"/n"}, {}, 5)));
    CHECK(AsI64(rank.Read(8)) == 5);
    // A rank is no agent: it may not change gculaunch's keys through the proxy either.
    rank.Send(V1(Req(Op::kSet, {"gculaunch/plan"}, {"evil"})));
    CHECK(rank.ReadsEof());
    CHECK(f.node0.log().WaitFor({"a rank may not change gculaunch's keys"}));
  }
  SECTION("no secret") {
    ProxyFixture f(options, "", /*wait_connected=*/false);
    CHECK(f.log().WaitFor({"store proxy:", "requires a job secret", "--job-secret-file"}));
    CHECK_THAT(f.lost(), Catch::Contains("requires a job secret"));
  }
  SECTION("a wrong secret") {
    ProxyFixture f(options, "wrong", /*wait_connected=*/false);
    CHECK(f.node0.log().WaitFor({"proof of the job secret is wrong"}));
    CHECK(f.log().WaitFor({"store proxy:", "closing the 0 rank connections"}));
  }
}

TEST_CASE("proxy: a client may not pose as a store proxy without the job secret",
          "[proxy][secret]") {
  ServerOptions options;
  options.agent_secret = "s3cret";
  ServerFixture node0(options);
  RawClient poser(node0.port());
  poser.Send(V1(Req(Op::kGet, {std::string(kUpstreamKey)})));
  CHECK(poser.ReadsEof());
  CHECK(node0.log().WaitFor({"without proving the job secret"}));
}

TEST_CASE("proxy: the store's connection cap counts proxied ranks", "[proxy]") {
  ServerOptions options;
  options.max_connections = 2;  // the upstream and one rank
  ProxyFixture f(options);
  RawClient first(f.port());
  first.Send(V1(Req(Op::kGetNumKeys)));
  CHECK(AsI64(first.Read(8)) == 0);
  RawClient second(f.port());
  second.Send(V1(Req(Op::kGetNumKeys)));
  CHECK(second.ReadsEof());
  CHECK(f.node0.log().WaitFor(
      {"refusing a rank's connection through the store proxy", "the limit is 2"}));
}

}  // namespace
}  // namespace gculaunch::rendezvous
