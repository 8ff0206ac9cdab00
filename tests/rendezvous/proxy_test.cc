// Tests of rendezvous/proxy.h against a real Server on loopback: every rank connection goes
// through one upstream connection, and each operation answers as the store answers it
// directly (both dialects, a blocking WAIT that stalls no one else, CANCEL_WAIT, WATCH_KEY
// events, a store-side close, an unknown code), a rank's disconnect ends its parked WAIT,
// a new restart attempt and a lost upstream close the ranks' connections, the job secret is
// proven (node 0 first), and proxied ranks have a cap of their own at node 0.  A node agent
// reaches node 0 through its node's proxy too: it proves the secret over its own stream, and
// node 0 hears of its stream's end, or its upstream's, as of a direct connection's.
#include "rendezvous/proxy.h"

#include <sys/socket.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "rendezvous/agent_auth.h"
#include "rendezvous/upstream.h"
#include "tests/rendezvous/decode_util.h"
#include "tests/rendezvous/proxy_test_util.h"
#include "tests/rendezvous/server_test_util.h"

namespace gculaunch::rendezvous {
namespace {

using testing::CaptureSink;
using testing::FromHex;
using testing::kHandshake;
using testing::ProxyFixture;
using testing::RawClient;
using testing::Req;
using testing::ServerFixture;
using testing::ToHex;
using testing::V1;
using testing::V2;

std::int64_t AsI64(const std::string& bytes) {
  return static_cast<std::int64_t>(LoadU64(reinterpret_cast<const std::uint8_t*>(bytes.data())));
}

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
    CHECK(f.node0.log().WaitFor(
        {"only a node agent that proved the job secret may change gculaunch's keys"}));
  }
  SECTION("no secret") {
    ProxyFixture f(options, "", /*wait_connected=*/false);
    CHECK(f.log().WaitFor({"store proxy:", "requires a job secret", "--job-secret-file"}));
    CHECK_THAT(f.lost(), Catch::Contains("requires a job secret"));
  }
  SECTION("a node 0 with another secret never sees the proxy's proof") {
    // Node 0 proves itself first (join_auth.h): the proxy finds the proof wrong and stops
    // there, so whatever answers at node 0's address learns nothing it could replay.
    ProxyFixture f(options, "wrong", /*wait_connected=*/false);
    CHECK(f.log().WaitFor({"store proxy:", "failed to prove that it holds the job secret",
                           "nothing is forwarded there", "closing the 0 rank connections"}));
    CHECK_THAT(f.lost(), Catch::Contains("failed to prove that it holds the job secret"));
    CHECK_FALSE(f.node0.log().Contains({"proof of the job secret"}));
  }
}

// GET on a v1 connection: the reply's blob.
std::string Get(RawClient& c, const std::string& key) {
  c.Send(V1(Req(Op::kGet, {key})));
  const std::string size = c.Read(8);
  const auto n = LoadU64(reinterpret_cast<const std::uint8_t*>(size.data()));
  return n == 0 ? "" : c.Read(n);
}

TEST_CASE("proxy: a node agent proves the job secret over its own stream", "[proxy][secret]") {
  ServerOptions options;
  options.agent_secret = "s3cret";
  ProxyFixture f(options, "s3cret");
  RawClient agent(f.port());
  // Node 0 proves itself first, over the agent's nonce.
  const std::string mine(64, 'a');
  CHECK(Get(agent, std::string(kNode0ProofPrefix) + mine) == NodeZeroProof("s3cret", mine));
  // Then the agent proves the secret, on its stream alone.
  const std::string nonce = Get(agent, std::string(kAuthNonceKey));
  REQUIRE(nonce.size() == 64);
  agent.Send(V1(Req(Op::kSet, {std::string(kAuthProofKey)}, {AuthProof("s3cret", nonce)})));
  CHECK(Get(agent, std::string(kAuthStatusKey)) == kAuthOk);
  agent.Send(V1(Req(Op::kSet, {"gculaunch/job/hb/1/1"}, {"1"})));
  CHECK(Get(agent, "gculaunch/job/hb/1/1") == "1");
  CHECK(f.node0.OnIo([&] { return f.node0.server().Get("job/hb/1/1").value_or(""); }) == "1");
  // Another stream of the same proxy is not proven by it.
  RawClient rank(f.port());
  CHECK(Get(rank, std::string(kAuthStatusKey)).empty());
  rank.Send(V1(Req(Op::kSet, {"gculaunch/job/hb/1/1"}, {"2"})));
  CHECK(rank.ReadsEof());
  // A wrong proof closes that stream only.
  RawClient wrong(f.port());
  const std::string other = Get(wrong, std::string(kAuthNonceKey));
  wrong.Send(V1(Req(Op::kSet, {std::string(kAuthProofKey)}, {AuthProof("guess", other)})));
  CHECK(wrong.ReadsEof());
  CHECK(f.node0.log().WaitFor({"stream", "its proof of the job secret is wrong"}));
  // A stream cannot become an upstream of its own.
  RawClient nested(f.port());
  nested.Send(V1(Req(Op::kGet, {std::string(kUpstreamKey)})));
  CHECK(nested.ReadsEof());
  CHECK(f.node0.log().WaitFor({"a connection through a store proxy cannot carry other"}));
  CHECK(Get(agent, "gculaunch/job/hb/1/1") == "1");
}

TEST_CASE("proxy: node 0 hears of a proxied connection that ended, as of a direct one", "[proxy]") {
  std::mutex mu;
  std::vector<std::pair<ConnId, std::string>> ended;
  ServerOptions options;
  options.connection_observer = [&](ConnId id, const std::string& why) {
    std::lock_guard<std::mutex> lock(mu);
    ended.emplace_back(id, why);
  };
  const auto heard = [&](ConnId id) {
    for (int i = 0; i < 2000; ++i) {
      {
        std::lock_guard<std::mutex> lock(mu);
        for (const auto& [conn, why] : ended) {
          if (conn == id) return why.empty();
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  };
  ProxyFixture f(options);
  auto agent = std::make_unique<RawClient>(f.port());
  CHECK(Get(*agent, "gculaunch/job/plan/0").empty());
  const ConnId first = f.node0.WaitForRequest(Op::kGet, 1);
  // Its host vanishing shows on the upstream connection, which keepalive then watches.
  CHECK(f.node0.OnIo([&] { return f.node0.server().KeepAlive(first, TcpKeepAlive{}); }));
  const int upstream_keepalive = f.node0.OnIo([&] {
    int on = 0;
    socklen_t len = sizeof on;
    int count = 0;
    for (int fd : f.node0.server().NativeHandlesForTest()) {
      if (::getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, &len) == 0 && on != 0) ++count;
    }
    return count;
  });
  CHECK(upstream_keepalive == 1);
  // The agent's connection closed at the proxy: its stream ends, as a peer's close.
  agent.reset();
  CHECK(heard(first));
  // The whole node's gculaunch ends: every stream ends with its upstream.
  RawClient second(f.port());
  CHECK(Get(second, "gculaunch/job/plan/0").empty());
  const ConnId next = f.node0.WaitForRequest(Op::kGet, 2);
  CHECK(next != first);
  f.StopProxy();
  CHECK(heard(next));
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

TEST_CASE("proxy: proxied ranks have their own cap, not the descriptors' one", "[proxy]") {
  ServerOptions options;
  options.max_connections = 1;  // the upstream only: a stream holds no descriptor at node 0
  options.max_streams = 2;
  ProxyFixture f(options);
  RawClient first(f.port());
  RawClient second(f.port());
  first.Send(V1(Req(Op::kAdd, {"/n"}, {}, 1)));
  CHECK(AsI64(first.Read(8)) == 1);
  second.Send(V1(Req(Op::kAdd, {"/n"}, {}, 1)));
  CHECK(AsI64(second.Read(8)) == 2);
  CHECK(f.node0_sessions() == 1);
  RawClient third(f.port());
  third.Send(V1(Req(Op::kGetNumKeys)));
  CHECK(third.ReadsEof());
  CHECK(f.node0.log().WaitFor({"refusing a rank's connection through the store proxy",
                               "2 proxied connections are open, the limit is 2"}));
  // The first two are served on.
  first.Send(V1(Req(Op::kAdd, {"/n"}, {}, 1)));
  CHECK(AsI64(first.Read(8)) == 3);
}

}  // namespace
}  // namespace gculaunch::rendezvous
