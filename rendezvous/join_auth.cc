#include "rendezvous/join_auth.h"

#include "rendezvous/agent_auth.h"

namespace gculaunch::rendezvous {
namespace {

JoinOutcome Step(JoinStep step, std::string detail = {}) {
  return JoinOutcome{step, std::move(detail), std::string()};
}

}  // namespace

Client::Task<JoinOutcome> JoinNodeZero(Client& client, std::string secret, std::string then_get) {
  // First write: the nonce, and node 0's proof over ours (a secret) or the caller's GET (none).
  std::vector<std::string> first{std::string(kAuthNonceKey)};
  std::string mine;
  if (!secret.empty()) {
    mine = NewAuthNonce();
    if (mine.empty()) co_return Step(JoinStep::kNoRandom);
    first.push_back(std::string(kNode0ProofPrefix) + mine);
  } else if (!then_get.empty()) {
    first.push_back(then_get);
  }
  std::vector<Result<std::string>> got = co_await client.GetAll(std::move(first));
  const Result<std::string>& nonce = got[0];
  if (!nonce.ok()) co_return Step(JoinStep::kNoAnswer, nonce.error().what);
  if (nonce->empty() && secret.empty()) {
    JoinOutcome joined;
    if (got.size() > 1) joined.then = std::move(got[1]);
    co_return joined;
  }
  if (nonce->empty()) co_return Step(JoinStep::kNodeZeroHasNoSecret);
  if (secret.empty()) co_return Step(JoinStep::kJoinerHasNoSecret);
  const Result<std::string>& proof = got[1];
  if (!proof.ok()) co_return Step(JoinStep::kNodeZeroUnproven, proof.error().what);
  if (!VerifyNodeZeroProof(secret, mine, *proof)) co_return Step(JoinStep::kNodeZeroWrong);
  // Node 0 proved the secret: now ours over its nonce, its verdict, and the caller's GET.
  std::vector<std::string> second{std::string(kAuthStatusKey)};
  if (!then_get.empty()) second.push_back(std::move(then_get));
  std::string proof_key(kAuthProofKey);
  std::string our_proof = AuthProof(secret, *nonce);
  std::vector<Result<std::string>> verdict =
      co_await client.GetAll(std::move(second), std::move(proof_key), std::move(our_proof));
  const Result<std::string>& status = verdict[0];
  if (!status.ok()) co_return Step(JoinStep::kRefused, status.error().what);
  if (*status != kAuthOk) co_return Step(JoinStep::kRefused, "not accepted");
  JoinOutcome joined;
  if (verdict.size() > 1) joined.then = std::move(verdict[1]);
  co_return joined;
}

}  // namespace gculaunch::rendezvous
