// Tests of etcd/client.h against Debian's real etcd 3.4 (tests/support/etcd_server.h)
// on loopback: key-value round-trips with binary keys, create-only transactions, leases,
// watches across a restarted member, a cut stream and a compaction, authentication with
// expiring tokens, and fail-over between endpoints.
#include "etcd/client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>
#include <optional>

#include "tests/etcd/gateway_fixture.h"
#include "tests/support/etcd_server.h"

// GCC 12 reports a false -Wmismatched-new-delete where Asio's awaitable frames are inlined.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace gculaunch::etcd {
namespace {

namespace asio = boost::asio;
using gateway_test::Post;
using gateway_test::Run;
using gateway_test::Sleep;
using testing::EtcdServer;
using testing::FreeLoopbackPort;

// GCC 12 refuses initializer lists inside coroutines ("array used as initializer"), so the
// coroutines below build their options and transactions through these functions.
ClientOptions Options(const std::string& first, const std::string& second = "") {
  ClientOptions options;
  auto parsed = ParseEndpoints(second.empty() ? first : first + "," + second);
  REQUIRE(parsed.ok());
  options.endpoints = *parsed;
  options.connect_timeout = std::chrono::milliseconds(500);
  options.request_timeout = std::chrono::seconds(3);
  return options;
}

// One compare, one operation on success, at most one on failure.
TxnRequest Txn1(Compare compare, RequestOp success, std::optional<RequestOp> failure) {
  TxnRequest txn;
  txn.compare.push_back(std::move(compare));
  txn.success.push_back(std::move(success));
  if (failure) txn.failure.push_back(std::move(*failure));
  return txn;
}

WatchOptions WatchOn(const std::string& key, bool prefix, std::int64_t start = 0) {
  WatchOptions options;
  options.key = key;
  if (prefix) options.range_end = PrefixEnd(key);
  options.start_revision = start;
  return options;
}

std::string Closed() { return "127.0.0.1:" + std::to_string(FreeLoopbackPort()); }

// Catch's assertion macros may evaluate their expression more than once, so every co_await
// below is made into a local first.

// Waits for `n` events (bounded: at most n batches).
asio::awaitable<std::vector<Event>> Collect(Watch& watch, std::size_t n) {
  std::vector<Event> out;
  for (std::size_t i = 0; i < n && out.size() < n; ++i) {
    auto batch = co_await watch.Next();
    if (!batch.ok()) FAIL(batch.error().what);
    REQUIRE(batch->compact_revision == 0);
    out.insert(out.end(), batch->events.begin(), batch->events.end());
  }
  co_return out;
}

TEST_CASE("put, range, prefix and delete round-trip binary keys and values") {
  EtcdServer etcd;
  Run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    Client client(ex, Options(etcd.endpoint()));
    const std::string prefix("/job/\x00\xff", 7);
    const std::string value("v\x00\n\xfe", 4);
    auto put = co_await client.Put(prefix + "a", value);
    REQUIRE(put.ok());
    auto put2 = co_await client.Put(prefix + "b", "2");
    REQUIRE(put2.ok());
    CHECK(put2->revision == put->revision + 1);
    auto outside = co_await client.Put("/job/\x01", "outside");
    REQUIRE(outside.ok());
    auto one = co_await client.Get(prefix + "a");
    REQUIRE(one.ok());
    REQUIRE(one->kvs.size() == 1);
    CHECK(one->kvs[0].key == prefix + "a");
    CHECK(one->kvs[0].value == value);
    CHECK(one->kvs[0].create_revision == put->revision);
    auto all = co_await client.GetPrefix(prefix);
    REQUIRE(all.ok());
    REQUIRE(all->kvs.size() == 2);
    CHECK(all->kvs[1].key == prefix + "b");
    auto missing = co_await client.Get("/nothing");
    REQUIRE(missing.ok());
    CHECK(missing->kvs.empty());
    auto deleted = co_await client.DeletePrefix(prefix);
    REQUIRE(deleted.ok());
    CHECK(deleted->deleted == 2);
    auto after = co_await client.GetPrefix("/job/");
    REQUIRE(after.ok());
    REQUIRE(after->kvs.size() == 1);
    CHECK(after->kvs[0].value == "outside");
    auto version = co_await client.Version();
    REQUIRE(version.ok());
    CHECK(version->server.rfind("3.", 0) == 0);
  });
}

TEST_CASE("a create-only transaction succeeds once, then reports failure and the holder") {
  EtcdServer etcd;
  Run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    Client client(ex, Options(etcd.endpoint()));
    auto create = [&](const std::string& who) {
      return client.Txn(Txn1(Compare::Missing("/job/node/0"), RequestOp::Put("/job/node/0", who),
                             RequestOp::Get("/job/node/0")));
    };
    auto first = co_await create("alpha");
    REQUIRE(first.ok());
    CHECK(first->succeeded);
    auto second = co_await create("beta");
    REQUIRE(second.ok());
    CHECK_FALSE(second->succeeded);
    REQUIRE(second->responses.size() == 1);
    REQUIRE(second->responses[0].range.kvs.size() == 1);
    const KeyValue holder = second->responses[0].range.kvs[0];
    CHECK(holder.value == "alpha");
    // A write guarded by the holder's creation revision passes; a stale guard does not.
    auto guarded =
        co_await client.Txn(Txn1(Compare::CreatedAt("/job/node/0", holder.create_revision),
                                 RequestOp::Put("/job/plan", "p1"), std::nullopt));
    REQUIRE(guarded.ok());
    CHECK(guarded->succeeded);
    auto stale =
        co_await client.Txn(Txn1(Compare::CreatedAt("/job/node/0", holder.create_revision + 100),
                                 RequestOp::Put("/job/plan", "p2"), std::nullopt));
    REQUIRE(stale.ok());
    CHECK_FALSE(stale->succeeded);
    auto plan = co_await client.Get("/job/plan");
    REQUIRE(plan.ok());
    CHECK(plan->kvs.at(0).value == "p1");
  });
}

TEST_CASE("a lease keeps its key alive until it is revoked, then keepalive reports expiry") {
  EtcdServer etcd;
  Run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    Client client(ex, Options(etcd.endpoint()));
    auto lease = co_await client.LeaseGrant(30);
    REQUIRE(lease.ok());
    CHECK(lease->ttl == 30);
    auto put = co_await client.Put("/job/alive/1", "x", lease->id);
    REQUIRE(put.ok());
    auto read = co_await client.Get("/job/alive/1");
    REQUIRE(read.ok());
    CHECK(read->kvs.at(0).lease == lease->id);
    auto refreshed = co_await client.LeaseKeepAlive(lease->id);
    REQUIRE(refreshed.ok());
    CHECK_FALSE(refreshed->expired);
    CHECK(refreshed->ttl > 0);
    auto revoked = co_await client.LeaseRevoke(lease->id);
    REQUIRE(revoked.ok());
    auto gone = co_await client.Get("/job/alive/1");
    REQUIRE(gone.ok());
    CHECK(gone->kvs.empty());
    auto after = co_await client.LeaseKeepAlive(lease->id);
    REQUIRE(after.ok());
    CHECK(after->expired);
    auto again = co_await client.LeaseRevoke(lease->id);
    REQUIRE(!again.ok());
    CHECK(again.error().what == "etcd at " + etcd.endpoint() + " refused lease revoke of " +
                                    std::to_string(lease->id) +
                                    ": etcdserver: requested lease not found (code 5)");
    auto unknown = co_await client.Put("/job/x", "y", 12345);
    REQUIRE(!unknown.ok());
    CHECK(unknown.error().what.find("requested lease not found") != std::string::npos);
  });
}

TEST_CASE("a lease that is not kept alive expires, its key goes, keepalive says expired") {
  EtcdServer etcd;
  Run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    Client client(ex, Options(etcd.endpoint()));
    auto lease = co_await client.LeaseGrant(1);  // etcd raises it to its minimum (2 s here)
    REQUIRE(lease.ok());
    REQUIRE(lease->ttl <= 3);
    auto put = co_await client.Put("/job/alive/2", "x", lease->id);
    REQUIRE(put.ok());
    // Bounded: at most 20 polls of 250 ms after the TTL.
    co_await Sleep(ex, std::chrono::seconds(lease->ttl));
    bool gone = false;
    for (int i = 0; i < 20 && !gone; ++i) {
      auto read = co_await client.Get("/job/alive/2");
      REQUIRE(read.ok());
      gone = read->kvs.empty();
      if (!gone) co_await Sleep(ex, std::chrono::milliseconds(250));
    }
    CHECK(gone);
    auto keepalive = co_await client.LeaseKeepAlive(lease->id);
    REQUIRE(keepalive.ok());
    CHECK(keepalive->expired);
    CHECK(keepalive->ttl == 0);
  });
}

TEST_CASE("a watch sees puts and deletes in order and resumes across a restarted etcd") {
  EtcdServer etcd;
  Run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    Client client(ex, Options(etcd.endpoint()));
    auto opened = co_await client.OpenWatch(WatchOn("/w/", true));
    REQUIRE(opened.ok());
    Watch& watch = **opened;
    auto done1 = co_await client.Put("/w/a", "1");
    REQUIRE(done1.ok());
    auto done2 = co_await client.Put("/w/b", "2");
    REQUIRE(done2.ok());
    auto done3 = co_await client.Put("/outside", "0");
    REQUIRE(done3.ok());
    auto done4 = co_await client.Delete("/w/a");
    REQUIRE(done4.ok());
    auto first = co_await Collect(watch, 3);
    REQUIRE(first.size() == 3);
    CHECK(first[0].kv.key == "/w/a");
    CHECK(first[0].kv.value == "1");
    CHECK(first[1].kv.key == "/w/b");
    CHECK(first[2].type == Event::Type::kDelete);
    CHECK(first[2].kv.key == "/w/a");
    const std::int64_t resume = watch.next_revision();
    CHECK(resume == first[2].kv.mod_revision + 1);

    etcd.Stop();
    etcd.Start();  // same data dir: the revisions go on
    auto done5 = co_await client.Put("/w/c", "3");
    REQUIRE(done5.ok());
    auto second = co_await Collect(watch, 1);
    REQUIRE(second.size() == 1);
    CHECK(second[0].kv.key == "/w/c");
    CHECK(second[0].kv.mod_revision == resume);  // nothing lost, nothing repeated

    // A cut connection (no restart): events written meanwhile arrive once.
    watch.Disconnect();
    auto done6 = co_await client.Put("/w/d", "4");
    REQUIRE(done6.ok());
    auto done7 = co_await client.Put("/w/e", "5");
    REQUIRE(done7.ok());
    auto third = co_await Collect(watch, 2);
    REQUIRE(third.size() == 2);
    CHECK(third[0].kv.key == "/w/d");
    CHECK(third[1].kv.key == "/w/e");
    CHECK(third[0].kv.mod_revision == second[0].kv.mod_revision + 1);
    watch.Cancel();
    auto cancelled = co_await watch.Next();
    REQUIRE(!cancelled.ok());
    CHECK(cancelled.error().what == "the watch on '/w/' was cancelled");
  });
}

TEST_CASE("a watch resuming below the compacted revision reports the compaction") {
  EtcdServer etcd;
  Run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    Client client(ex, Options(etcd.endpoint()));
    auto opened = co_await client.OpenWatch(WatchOn("/c/", true));
    REQUIRE(opened.ok());
    Watch& watch = **opened;
    auto done8 = co_await client.Put("/c/1", "a");
    REQUIRE(done8.ok());
    auto first = co_await Collect(watch, 1);
    REQUIRE(first.size() == 1);
    watch.Disconnect();
    auto done9 = co_await client.Put("/c/2", "b");
    REQUIRE(done9.ok());
    auto last = co_await client.Put("/c/3", "c");
    REQUIRE(last.ok());
    auto compacted = co_await client.CompactForTest(last->revision);
    REQUIRE(compacted.ok());
    auto batch = co_await watch.Next();
    REQUIRE(batch.ok());
    CHECK(batch->events.empty());
    CHECK(batch->compact_revision == last->revision);
    // A new watch from below the compaction is told the same at once.
    auto old = co_await client.OpenWatch(WatchOn("/c/", true, 2));
    REQUIRE(old.ok());
    auto old_batch = co_await (*old)->Next();
    REQUIRE(old_batch.ok());
    CHECK(old_batch->compact_revision == last->revision);
    auto range = co_await client.Range("/c/1", "", 2);
    REQUIRE(!range.ok());
    CHECK(range.error().what.find("required revision has been compacted (code 11)") !=
          std::string::npos);
  });
}

TEST_CASE("authentication: a wrong password is refused, an expired token is renewed") {
  EtcdServer etcd(EtcdServer::Options{.auth_token_ttl = 2});
  const std::uint16_t port = etcd.client_port();
  REQUIRE(Post(port, "/v3/auth/user/add", R"({"name":"root","password":"secret"})").find(" 200 ") !=
          std::string::npos);
  REQUIRE(Post(port, "/v3/auth/role/add", R"({"name":"root"})").find(" 200 ") != std::string::npos);
  REQUIRE(Post(port, "/v3/auth/user/grant", R"({"user":"root","role":"root"})").find(" 200 ") !=
          std::string::npos);
  REQUIRE(Post(port, "/v3/auth/enable", "{}").find(" 200 ") != std::string::npos);
  Run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    ClientOptions bad_options = Options(etcd.endpoint());
    bad_options.user = "root";
    bad_options.password = "wrong";
    Client bad(ex, bad_options);
    auto refused = co_await bad.Put("/a", "1");
    REQUIRE(!refused.ok());
    CHECK(refused.error().Format() ==
          "gculaunch: etcd at " + etcd.endpoint() +
              " refused user 'root': etcdserver: authentication failed, invalid user ID or "
              "password (fix: check the etcd user name and password)");
    CHECK(refused.error().exit_code == kRefusedExitCode);  // a launcher stops at once
    Client anonymous(ex, Options(etcd.endpoint()));
    auto no_user = co_await anonymous.Put("/a", "1");
    REQUIRE(!no_user.ok());
    CHECK(no_user.error().what.find("user name is empty") != std::string::npos);
    CHECK(no_user.error().exit_code == kRefusedExitCode);

    ClientOptions options = Options(etcd.endpoint());
    options.user = "root";
    options.password = "secret";
    Client client(ex, options);
    auto done10 = co_await client.Put("/a", "1");
    REQUIRE(done10.ok());
    CHECK(client.authentications() == 1);
    auto opened = co_await client.OpenWatch(WatchOn("/a", false));
    REQUIRE(opened.ok());
    co_await Sleep(ex, std::chrono::milliseconds(3500));  // the 2 s token expires
    auto put = co_await client.Put("/a", "2");
    REQUIRE(put.ok());
    CHECK(client.authentications() == 2);
    auto events = co_await Collect(**opened, 1);
    REQUIRE(events.size() == 1);
    CHECK(events[0].kv.value == "2");
  });
}

TEST_CASE("fail-over: a closed first endpoint is skipped, none reachable is a clear error") {
  EtcdServer etcd;
  Run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    const std::string closed = Closed();
    Client client(ex, Options(closed, etcd.endpoint()));
    auto put = co_await client.Put("/f", "1");
    REQUIRE(put.ok());
    CHECK(client.current_endpoint() == etcd.endpoint());
    auto opened =
        co_await Client(ex, Options(closed, etcd.endpoint())).OpenWatch(WatchOn("/f", false));
    REQUIRE(opened.ok());

    const std::string other = Closed();
    Client none(ex, Options(closed, other));
    const auto start = std::chrono::steady_clock::now();
    auto failed = co_await none.Get("/f");
    REQUIRE(!failed.ok());
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(3));
    CHECK(failed.error().what == "no etcd endpoint answered /v3/kv/range: " + closed +
                                     ": cannot connect: Connection refused; " + other +
                                     ": cannot connect: Connection refused");
    CHECK(failed.error().exit_code == 0);  // etcd may come: a launcher keeps trying
  });
}

TEST_CASE("an endpoint that accepts but never answers times out and fails over") {
  EtcdServer etcd;
  // A listening socket nobody accepts on: the connect succeeds, the reply never comes.
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(fd, 8) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  const std::string silent = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  Run([&](asio::any_io_executor ex) -> asio::awaitable<void> {
    ClientOptions options = Options(silent, etcd.endpoint());
    options.request_timeout = std::chrono::milliseconds(400);
    Client client(ex, options);
    auto put = co_await client.Put("/t", "1");
    REQUIRE(put.ok());
    CHECK(client.current_endpoint() == etcd.endpoint());
    Client alone(ex, [&] {
      ClientOptions o = options;
      o.endpoints.resize(1);
      return o;
    }());
    auto failed = co_await alone.Get("/t");
    REQUIRE(!failed.ok());
    CHECK(failed.error().what == "no etcd endpoint answered /v3/kv/range: " + silent +
                                     ": /v3/kv/range failed: no reply within 400 ms");
  });
  ::close(fd);
}

TEST_CASE("endpoint lists parse with defaults and refuse what is not host:port") {
  auto parsed = ParseEndpoints("10.0.0.1:2379,http://node2,[::1]:23790");
  REQUIRE(parsed.ok());
  REQUIRE(parsed->size() == 3);
  CHECK((*parsed)[1].host == "node2");
  CHECK((*parsed)[1].port == 2379);
  CHECK((*parsed)[2].ToString() == "[::1]:23790");
  auto bad = ParseEndpoints("node1:2379,node2:http");
  REQUIRE(!bad.ok());
  CHECK(bad.error().Format() ==
        "gculaunch: etcd endpoint 'node2:http': 'http' is no port (fix: give host:port pairs "
        "separated by commas, e.g. 10.0.0.1:2379,10.0.0.2:2379)");
  auto tls = ParseEndpoints("https://node1:2379,https://[::1]/");
  REQUIRE(tls.ok());
  REQUIRE(tls->size() == 2);
  CHECK((*tls)[0].tls);
  CHECK((*tls)[1].ToString() == "[::1]:2379");
  CHECK_FALSE((*parsed)[1].tls);
  auto mixed = ParseEndpoints("https://node1:2379,node2:2379");
  REQUIRE(!mixed.ok());
  CHECK(mixed.error().Format() ==
        "gculaunch: etcd endpoint 'node2:2379' is http:// but 'node1:2379' is https:// (fix: "
        "give every endpoint the same scheme: all https:// (TLS) or all http://)");
  CHECK_FALSE(ParseEndpoints("").ok());
}

}  // namespace
}  // namespace gculaunch::etcd
