// JoinNodeZero: the joining side of the job secret's handshake (agent_auth.h), on a fresh
// client connection to node 0's store.  Node agents (launcher/cluster/agent_link.cc) and
// store proxies (proxy.h) both join through it, so that neither trusts a node 0 that has not
// proven the secret first:
//
//   GET nonce            node 0's challenge ("" when it has no secret)
//   GET node0-proof/<n>  node 0 proves the secret over a nonce of our choosing
//   SET proof            then we prove it over node 0's nonce
//   GET status           "ok" once node 0 accepted our proof
//   GET <then_get>       the caller's first request, if it has one
//
// A node 0 without a secret and a joiner without one skip the proofs (torch's TCPStore has
// no authentication; docs/security.md).  Every failure comes back as a JoinStep with the
// client's own error text, and each caller words it for its own user.
//
// Round trips: requests that do not wait for an answer leave together (Client::GetAll), so
// the handshake costs node 0 two round trips with a secret (the nonce with the request for
// node 0's proof; then our proof, the verdict and the caller's GET) and one without (the
// nonce with the caller's GET).  Our proof still leaves only after node 0's was checked.
// At 16k nodes every round trip is tens of thousands of replies from node 0's one thread.
//
// Thread safety: runs on the client's executor, like every Client call.
#pragma once

#include <cstdint>
#include <string>

#include "rendezvous/client.h"

namespace gculaunch::rendezvous {

enum class JoinStep : std::uint8_t {
  kOk,
  kNoAnswer,             ///< the nonce request failed (detail: the client's error)
  kNodeZeroHasNoSecret,  ///< node 0 runs without a secret, the joiner has one
  kJoinerHasNoSecret,    ///< node 0 requires a secret, the joiner has none
  kNoRandom,             ///< no random bytes for the joiner's nonce
  kNodeZeroUnproven,     ///< node 0 did not answer the proof request (an older gculaunch, or
                         ///< not a gculaunch store); detail: the client's error
  kNodeZeroWrong,        ///< node 0's proof is wrong: another secret, or not node 0
  kRefused,              ///< node 0 refused the joiner's proof (detail: why)
};

struct JoinOutcome {
  JoinStep step = JoinStep::kOk;
  std::string detail;  ///< the client's error text or node 0's answer, where there is one
  /// ok(): the answer to `then_get` (its value, or the client's error); "" without one.
  Result<std::string> then = std::string();
  bool ok() const { return step == JoinStep::kOk; }
};

/// Runs the handshake with `secret` ("" for none) on `client`, then GETs `then_get` (none
/// when empty) in the handshake's last write.
Client::Task<JoinOutcome> JoinNodeZero(Client& client, std::string secret,
                                       std::string then_get = {});

}  // namespace gculaunch::rendezvous
