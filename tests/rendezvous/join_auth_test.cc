// Tests of the joining side of the job secret's handshake (rendezvous/join_auth.h) against a
// scripted store that answers nothing until it has a step's requests: what leaves in which
// write (one round trip without a secret, two with one), the caller's GET riding the last
// write, and a joiner that never sends its own proof to a node 0 that failed to prove itself.
#include "rendezvous/join_auth.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <optional>

#include "rendezvous/agent_auth.h"
#include "tests/rendezvous/scripted_store.h"
#include "tests/rendezvous/server_test_util.h"

// GCC 12 reports a false -Wmismatched-new-delete where Asio's awaitable frames (allocated
// and freed by the same class-specific operators) are inlined into these coroutines.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace gculaunch::rendezvous {
namespace {

namespace asio = boost::asio;
using testing::Blob;
using testing::ScriptedStore;
using testing::Word;

constexpr std::uint32_t kPing = 4321;
const std::string kSecret = "s3cret-of-the-job";
const std::string kThen = "gculaunch/job/missing";

// The client's own v2 handshake: VALIDATE and PING, answered with the echo.
ScriptedStore::Step Handshake() {
  return {2, [](const std::vector<Request>&) { return Word(kPing); }};
}

// Connects a v2 client to `port` and runs the handshake with `secret`, asking for kThen.
JoinOutcome Join(std::uint16_t port, const std::string& secret) {
  asio::io_context io;
  std::optional<JoinOutcome> out;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        ClientOptions o;
        o.port = port;
        o.ping_nonce = kPing;
        o.connect_timeout = std::chrono::seconds(10);
        auto c = co_await Client::Connect(o);
        if (!c.ok()) {
          out.emplace(JoinOutcome{JoinStep::kNoAnswer, c.error().what, std::string()});
          co_return;
        }
        std::string then = kThen;
        JoinOutcome joined = co_await JoinNodeZero(*c, secret, std::move(then));
        out.emplace(std::move(joined));
      },
      asio::detached);
  io.run_for(testing::kHangGuard);
  REQUIRE(out.has_value());
  return std::move(*out);
}

std::vector<std::string> Keys(const std::vector<Request>& requests) {
  std::vector<std::string> keys;
  for (const Request& r : requests) keys.push_back(r.keys.empty() ? "" : r.keys[0]);
  return keys;
}

TEST_CASE("join: without a secret, the nonce and the caller's GET leave in one write",
          "[auth][join]") {
  ScriptedStore fake({Handshake(), {2, [](const std::vector<Request>&) {
                                      return Blob("") + Blob("still missing: node 3");
                                    }}});
  const JoinOutcome joined = Join(fake.port(), "");
  fake.Join();
  CHECK(fake.failure().empty());
  REQUIRE(joined.ok());
  REQUIRE(joined.then.ok());
  CHECK(*joined.then == "still missing: node 3");
  REQUIRE(fake.received().size() == 2);
  CHECK(Keys(fake.received()[1]) == std::vector<std::string>{std::string(kAuthNonceKey), kThen});
}

TEST_CASE("join: with a secret, two writes: the proof request, then our proof and the GET",
          "[auth][join]") {
  const std::string node0_nonce(64, 'a');
  ScriptedStore fake({Handshake(),
                      {2,
                       [&](const std::vector<Request>& got) {
                         const std::string key = got.size() == 2 ? got[1].keys.at(0) : "";
                         const std::string mine =
                             key.substr(std::min(key.size(), kNode0ProofPrefix.size()));
                         return Blob(node0_nonce) + Blob(NodeZeroProof(kSecret, mine));
                       }},
                      {3, [](const std::vector<Request>&) {
                         return Blob(kAuthOk) + Blob("still missing: node 3");
                       }}});
  const JoinOutcome joined = Join(fake.port(), kSecret);
  fake.Join();
  CHECK(fake.failure().empty());
  REQUIRE(joined.ok());
  REQUIRE(joined.then.ok());
  CHECK(*joined.then == "still missing: node 3");
  REQUIRE(fake.received().size() == 3);
  const std::vector<Request>& first = fake.received()[1];
  REQUIRE(first.size() == 2);
  CHECK(first[0].keys.at(0) == kAuthNonceKey);
  CHECK(first[1].keys.at(0).starts_with(kNode0ProofPrefix));
  const std::vector<Request>& second = fake.received()[2];
  REQUIRE(second.size() == 3);
  CHECK(second[0].op == Op::kSet);
  CHECK(second[0].keys.at(0) == kAuthProofKey);
  CHECK(second[0].values.at(0) == AuthProof(kSecret, node0_nonce));
  CHECK(Keys(second) ==
        std::vector<std::string>{std::string(kAuthProofKey), std::string(kAuthStatusKey), kThen});
}

TEST_CASE("join: a node 0 whose proof is wrong never gets ours", "[auth][join]") {
  ScriptedStore fake(
      {Handshake(),
       {2, [](const std::vector<Request>&) { return Blob(std::string(64, 'a')) + Blob("forged"); }},
       {3, [](const std::vector<Request>&) { return Blob(kAuthOk) + Blob(""); }}});
  const JoinOutcome joined = Join(fake.port(), kSecret);
  CHECK(joined.step == JoinStep::kNodeZeroWrong);
  fake.Join();
  // The third step never came: the joiner sent nothing after node 0's wrong proof, and its
  // close ended the script at once.
  CHECK_FALSE(fake.failure().empty());
  REQUIRE(fake.received().size() == 3);
  CHECK(fake.received()[2].empty());
}

TEST_CASE("join: a joiner without a secret stops at node 0's nonce", "[auth][join]") {
  ScriptedStore fake({Handshake(), {2, [](const std::vector<Request>&) {
                                      return Blob(std::string(64, 'a')) + Blob("");
                                    }}});
  const JoinOutcome joined = Join(fake.port(), "");
  fake.Join();
  CHECK(joined.step == JoinStep::kJoinerHasNoSecret);
}

}  // namespace
}  // namespace gculaunch::rendezvous
