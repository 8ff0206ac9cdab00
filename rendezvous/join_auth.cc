#include "rendezvous/join_auth.h"

#include "rendezvous/agent_auth.h"

namespace gculaunch::rendezvous {
namespace {

// Node 0 proves the secret over a nonce of the joiner's choosing.
Client::Task<JoinOutcome> CheckNodeZero(Client& client, const std::string& secret) {
  const std::string mine = NewAuthNonce();
  if (mine.empty()) co_return JoinOutcome{JoinStep::kNoRandom, ""};
  // Named, not temporaries: g++ 12 mishandles temporaries that live across co_await.
  std::string key = std::string(kNode0ProofPrefix) + mine;
  auto proof = co_await client.Get(std::move(key));
  if (!proof.ok()) co_return JoinOutcome{JoinStep::kNodeZeroUnproven, proof.error().what};
  if (!VerifyNodeZeroProof(secret, mine, *proof))
    co_return JoinOutcome{JoinStep::kNodeZeroWrong, ""};
  co_return JoinOutcome{};
}

// The joiner's proof over node 0's nonce, and node 0's verdict.
Client::Task<JoinOutcome> SendProof(Client& client, const std::string& secret,
                                    const std::string& nonce) {
  std::string proof_key(kAuthProofKey);
  std::string proof = AuthProof(secret, nonce);
  Status sent = co_await client.Set(std::move(proof_key), std::move(proof));
  if (!sent.ok()) co_return JoinOutcome{JoinStep::kRefused, sent.error().what};
  std::string status_key(kAuthStatusKey);
  auto status = co_await client.Get(std::move(status_key));
  if (!status.ok()) co_return JoinOutcome{JoinStep::kRefused, status.error().what};
  if (*status != kAuthOk) co_return JoinOutcome{JoinStep::kRefused, "not accepted"};
  co_return JoinOutcome{};
}

}  // namespace

Client::Task<JoinOutcome> JoinNodeZero(Client& client, std::string secret) {
  std::string nonce_key(kAuthNonceKey);
  auto nonce = co_await client.Get(std::move(nonce_key));
  if (!nonce.ok()) co_return JoinOutcome{JoinStep::kNoAnswer, nonce.error().what};
  if (nonce->empty() && secret.empty()) co_return JoinOutcome{};
  if (nonce->empty()) co_return JoinOutcome{JoinStep::kNodeZeroHasNoSecret, ""};
  if (secret.empty()) co_return JoinOutcome{JoinStep::kJoinerHasNoSecret, ""};
  JoinOutcome node0 = co_await CheckNodeZero(client, secret);
  if (!node0.ok()) co_return node0;
  co_return co_await SendProof(client, secret, *nonce);
}

}  // namespace gculaunch::rendezvous
