// Authentication of the etcd client (etcd/client.h) against Debian's real etcd 3.4
// whose tokens live 2 s (--auth-token-ttl): one client with a user and a password keeps a
// lease alive, writes and watches across several token lifetimes, its watch reopened after its
// token expired.
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>
#include <functional>

#include "etcd/client.h"
#include "tests/etcd/gateway_fixture.h"
#include "tests/support/etcd_server.h"

// GCC 12 reports a false -Wmismatched-new-delete where Asio's awaitable frames are inlined.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace gculaunch::etcd {
namespace {

namespace asio = boost::asio;
using gateway_test::Post;
using gateway_test::Sleep;
using testing::EtcdServer;

// Adds root/secret with the root role and turns authentication on.
void EnableAuth(std::uint16_t port) {
  REQUIRE(Post(port, "/v3/auth/user/add", R"({"name":"root","password":"secret"})").find(" 200 ") !=
          std::string::npos);
  REQUIRE(Post(port, "/v3/auth/role/add", R"({"name":"root"})").find(" 200 ") != std::string::npos);
  REQUIRE(Post(port, "/v3/auth/user/grant", R"({"user":"root","role":"root"})").find(" 200 ") !=
          std::string::npos);
  REQUIRE(Post(port, "/v3/auth/enable", "{}").find(" 200 ") != std::string::npos);
}

TEST_CASE("authentication: lease, writes and a reopened watch outlive several 2 s tokens") {
  EtcdServer etcd(EtcdServer::Options{.auth_token_ttl = 2});
  EnableAuth(etcd.client_port());
  asio::io_context io;
  bool finished = false;
  std::exception_ptr error;
  auto body = [&]() -> asio::awaitable<void> {
    auto ex = io.get_executor();
    ClientOptions options;
    options.endpoints = *ParseEndpoints(etcd.endpoint());
    options.user = "root";
    options.password = "secret";
    Client client(ex, options);
    auto lease = co_await client.LeaseGrant(6);
    if (!lease.ok()) FAIL(lease.error().Format());
    WatchOptions watch_options;
    watch_options.key = "/auth/";
    watch_options.range_end = PrefixEnd("/auth/");
    auto opened = co_await client.OpenWatch(watch_options);
    if (!opened.ok()) FAIL(opened.error().Format());
    Watch& watch = **opened;
    auto first = co_await client.Put("/auth/0", "0", lease->id);
    REQUIRE(first.ok());
    CHECK(client.authentications() == 1);
    // Each round starts after the token expired and before the lease (6 s) does: 3.3 s
    // without a request, while etcd drops a token 2 s after its last use, checking once a
    // second. Odd rounds: the lease keepalive first (etcd 3.4 renews leases without looking at
    // the token), then a write that re-authenticates; even rounds: the watch, cut and reopened
    // with the expired token, re-authenticates.
    for (int round = 1; round <= 3; ++round) {
      co_await Sleep(ex, std::chrono::milliseconds(3300));
      const std::string previous = std::to_string(round - 1);
      if (round % 2 == 1) {
        auto kept = co_await client.LeaseKeepAlive(lease->id);
        if (!kept.ok()) FAIL(kept.error().Format());
        CHECK_FALSE(kept->expired);
        auto batch = co_await watch.Next();  // the stream opened with an older token stays
        if (!batch.ok()) FAIL(batch.error().Format());
        REQUIRE(batch->events.size() == 1);
        CHECK(batch->events[0].kv.value == previous);
      } else {
        watch.Disconnect();
        auto batch = co_await watch.Next();  // reopened with an expired token first
        if (!batch.ok()) FAIL(batch.error().Format());
        CHECK(client.authentications() == 1 + round);
        REQUIRE(batch->events.size() == 1);
        CHECK(batch->events[0].kv.value == previous);
        auto kept = co_await client.LeaseKeepAlive(lease->id);
        if (!kept.ok()) FAIL(kept.error().Format());
        CHECK_FALSE(kept->expired);
      }
      const std::string key = "/auth/" + std::to_string(round);
      auto put = co_await client.Put(key, std::to_string(round), lease->id);
      if (!put.ok()) FAIL(put.error().Format());
      CHECK(client.authentications() == 1 + round);
    }
    auto all = co_await client.GetPrefix("/auth/");
    REQUIRE(all.ok());
    CHECK(all->kvs.size() == 4);  // every key still held by the lease kept alive
    finished = true;
  };
  asio::co_spawn(io, body, [&](std::exception_ptr e) { error = std::move(e); });
  io.run_for(std::chrono::seconds(40));
  if (error) std::rethrow_exception(error);
  REQUIRE(finished);
}

}  // namespace
}  // namespace gculaunch::etcd
