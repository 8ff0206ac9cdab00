// Tests of the job secret (rendezvous/agent_auth.h) and of the server's guard of the
// launcher's keys (rendezvous/server.h): the HMAC, the exchange on a raw socket, refused
// writes before the proof and accepted ones after it, a wrong proof, the reserved keys, a
// store without a secret (as open as before), and --store-allow letting loopback in.
#include "rendezvous/agent_auth.h"

#include <catch2/catch.hpp>

#include "tests/rendezvous/decode_util.h"
#include "tests/rendezvous/server_test_util.h"

namespace gculaunch::rendezvous {
namespace {

using testing::Encode;
using testing::RawClient;
using testing::Req;
using testing::ServerFixture;
using testing::V1;

const std::string kSecret = "s3cret-of-the-job";

// GET on a v1 connection: the reply's blob.
std::string Get(RawClient& c, const std::string& key) {
  c.Send(V1(Req(Op::kGet, {key})));
  const std::string size = c.Read(8);
  const auto n = LoadU64(reinterpret_cast<const std::uint8_t*>(size.data()));
  return n == 0 ? "" : c.Read(n);
}

// The agent's side of the exchange.
void Prove(RawClient& c, const std::string& secret) {
  const std::string nonce = Get(c, std::string(kAuthNonceKey));
  REQUIRE(nonce.size() == 64);
  c.Send(V1(Req(Op::kSet, {std::string(kAuthProofKey)}, {AuthProof(secret, nonce)})));
}

ServerOptions WithSecret() {
  ServerOptions o;
  o.agent_secret = kSecret;
  return o;
}

TEST_CASE("agent auth: the proof is HMAC-SHA256 over the context and the nonce", "[auth]") {
  // Python: hmac.new(b"Jefe", b"gculaunch agent proof v1\n" + b"what do ya want for
  // nothing?", hashlib.sha256).hexdigest()  (RFC 4231 case 2's key and data).
  CHECK(AuthProof("Jefe", "what do ya want for nothing?") ==
        "42bb7c6a4f8bed2c427f3b74387dacf4e8d6c22bd9f3f2d1129ca43c435e235e");
  const std::string nonce = NewAuthNonce();
  CHECK(nonce.size() == 64);
  CHECK(nonce != NewAuthNonce());
  CHECK(VerifyAuthProof("k", nonce, AuthProof("k", nonce)));
  CHECK_FALSE(VerifyAuthProof("k", nonce, AuthProof("other", nonce)));
  CHECK_FALSE(VerifyAuthProof("k", nonce, AuthProof("k", NewAuthNonce())));
  CHECK_FALSE(VerifyAuthProof("k", nonce, ""));
  CHECK_FALSE(VerifyAuthProof("k", "", AuthProof("k", "")));
}

TEST_CASE("agent auth: node 0's proof binds its own context and the agent's nonce", "[auth]") {
  // Python: hmac.new(b"Jefe", b"gculaunch node 0 proof v1\n" + b"what do ya want for
  // nothing?", hashlib.sha256).hexdigest()
  CHECK(NodeZeroProof("Jefe", "what do ya want for nothing?") ==
        "b3f587daf70dc2adbdca845e661d9ae4769fd0770780066816cf4b53499c3154");
  const std::string nonce = NewAuthNonce();
  CHECK(VerifyNodeZeroProof("k", nonce, NodeZeroProof("k", nonce)));
  // Neither proof passes for the other: a reflected agent proof is no proof of node 0.
  CHECK_FALSE(VerifyNodeZeroProof("k", nonce, AuthProof("k", nonce)));
  CHECK_FALSE(VerifyAuthProof("k", nonce, NodeZeroProof("k", nonce)));
  CHECK_FALSE(VerifyNodeZeroProof("k", nonce, NodeZeroProof("other", nonce)));
  CHECK_FALSE(VerifyNodeZeroProof("k", "", NodeZeroProof("k", "")));
  CHECK(IsAgentNonce(nonce));
  CHECK_FALSE(IsAgentNonce("abc"));
  CHECK_FALSE(IsAgentNonce(std::string(64, 'G')));
  CHECK_FALSE(IsAgentNonce(std::string(130, 'a')));
}

TEST_CASE("agent auth: node 0 proves the secret over the agent's nonce", "[auth][server]") {
  ServerFixture f(WithSecret());
  RawClient agent(f.port());
  const std::string mine = NewAuthNonce();
  const std::string proof = Get(agent, std::string(kNode0ProofPrefix) + mine);
  CHECK(VerifyNodeZeroProof(kSecret, mine, proof));
  CHECK_FALSE(VerifyNodeZeroProof("another secret", mine, proof));
  // The agent's own proof still works on the same connection afterwards.
  Prove(agent, kSecret);
  CHECK(Get(agent, std::string(kAuthStatusKey)) == kAuthOk);
  // A nonce that is not hex is refused (node 0 signs nothing else).
  RawClient odd(f.port());
  odd.Send(V1(Req(Op::kGet, {std::string(kNode0ProofPrefix) + "not a nonce"})));
  CHECK(odd.ReadsEof());
  CHECK(f.log().WaitFor({"over a nonce that is not 32 to 128 lower-case hex digits"}));
  // Without a secret node 0 proves nothing: "" (the agent with a secret then stops).
  ServerFixture open;
  RawClient c(open.port());
  CHECK(Get(c, std::string(kNode0ProofPrefix) + mine).empty());
}

TEST_CASE("agent auth: without the proof, writes of launcher keys close the connection",
          "[auth][server]") {
  ServerFixture f(WithSecret());
  const std::vector<Request> writes = {
      Req(Op::kSet, {"gculaunch/job/stop/0"}, {"forged"}),
      Req(Op::kCompareSet, {"gculaunch/job/stop/0"}, {"", "forged"}),
      Req(Op::kAdd, {"gculaunch/job/joinseq/1"}, {}, 1),
      Req(Op::kDeleteKey, {"gculaunch/run_id"}),
      Req(Op::kAppend, {"gculaunch/job/plan/0"}, {"x"}),
      Req(Op::kMultiSet, {"/rank", "gculaunch/job/plan/0"}, {"a", "b"}),
  };
  for (const Request& r : writes) {
    INFO(Describe(r));
    const Dialect dialect =
        r.op == Op::kAppend || r.op == Op::kMultiSet ? Dialect::kV2 : Dialect::kV1;
    RawClient c(f.port());
    if (dialect == Dialect::kV2) c.Send(testing::kHandshake);
    c.Send(Encode(dialect, r));
    CHECK(c.ReadsEof());
  }
  CHECK(f.log().WaitFor({"refused SET [\"gculaunch/job/stop/0\"]", "--job-secret-file"}));
  f.OnIo([&] { return 0; });
  CHECK_FALSE(f.server().Get("job/stop/0").has_value());
  CHECK(f.server().Get("run_id") == std::nullopt);
  // Reads stay open, and the ranks' keys are not the secret's business.
  f.OnIo([&] {
    f.server().Set("job/info", "node 0");
    return 0;
  });
  RawClient reader(f.port());
  CHECK(Get(reader, "gculaunch/job/info") == "node 0");
  reader.Send(V1(Req(Op::kSet, {"/worker/x"}, {"1"})));
  CHECK(Get(reader, "/worker/x") == "1");
  CHECK(Get(reader, std::string(kAuthStatusKey)).empty());
}

TEST_CASE("agent auth: after the proof the agent writes as before", "[auth][server]") {
  ServerFixture f(WithSecret());
  RawClient agent(f.port());
  Prove(agent, kSecret);
  CHECK(Get(agent, std::string(kAuthStatusKey)) == kAuthOk);
  agent.Send(V1(Req(Op::kSet, {"gculaunch/job/stop/0"}, {"marker"})));
  agent.Send(V1(Req(Op::kAdd, {"gculaunch/job/hb/1/1"}, {}, 1)));
  CHECK(agent.Read(8).size() == 8);
  CHECK(f.OnIo([&] { return f.server().Get("job/stop/0"); }) == "marker");
  // The proof belongs to its connection: another one is still refused.
  RawClient other(f.port());
  other.Send(V1(Req(Op::kSet, {"gculaunch/job/stop/1"}, {"forged"})));
  CHECK(other.ReadsEof());
}

TEST_CASE("agent auth: a wrong proof, a replayed one and the reserved keys close",
          "[auth][server]") {
  ServerFixture f(WithSecret());
  RawClient wrong(f.port());
  Prove(wrong, "another secret");
  CHECK(wrong.ReadsEof());
  CHECK(f.log().WaitFor({"its proof of the job secret is wrong"}));
  // A proof answers one nonce: sending it again (without a fresh nonce) is refused.
  RawClient agent(f.port());
  const std::string nonce = Get(agent, std::string(kAuthNonceKey));
  const std::string proof = AuthProof(kSecret, nonce);
  agent.Send(V1(Req(Op::kSet, {std::string(kAuthProofKey)}, {proof})));
  CHECK(Get(agent, std::string(kAuthStatusKey)) == kAuthOk);
  RawClient replay(f.port());
  replay.Send(V1(Req(Op::kSet, {std::string(kAuthProofKey)}, {proof})));
  CHECK(replay.ReadsEof());
  RawClient reserved(f.port());
  reserved.Send(V1(Req(Op::kSet, {"gculaunch/auth/status"}, {"ok"})));
  CHECK(reserved.ReadsEof());
  CHECK(f.log().WaitFor({"are reserved for the node agents' proof"}));
}

TEST_CASE("agent auth: without a secret the store is as open as before", "[auth][server]") {
  ServerFixture f;
  RawClient c(f.port());
  CHECK(Get(c, std::string(kAuthNonceKey)).empty());  // tells an agent there is no secret
  c.Send(V1(Req(Op::kSet, {"gculaunch/job/stop/0"}, {"anyone"})));
  CHECK(Get(c, "gculaunch/job/stop/0") == "anyone");
}

TEST_CASE("store allow-list: loopback is always allowed", "[auth][server]") {
  ServerOptions o;
  auto n = ParseNetwork("10.0.0.0/8");
  REQUIRE(n.ok());
  o.allow = {*n};
  ServerFixture f(o);
  RawClient c(f.port());
  c.Send(V1(Req(Op::kSet, {"/k"}, {"v"})));
  CHECK(Get(c, "/k") == "v");
}

}  // namespace
}  // namespace gculaunch::rendezvous
