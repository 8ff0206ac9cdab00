// The node agents' proof of the job secret (--job-secret-file; docs/tcpstore-protocol.md
// section 8.5): a challenge and response inside the TCPStore protocol, so that torch's
// clients, which cannot authenticate, see the store they always saw.
//
//   agent -> GET gculaunch/auth/nonce    <- 64 hex digits: 32 random bytes, new for each GET
//                                           of this connection ("" when the store has no
//                                           secret)
//   agent -> GET gculaunch/auth/node0-proof/<agent nonce>
//                                        <- hex HMAC-SHA256(secret, kNode0Context + agent
//                                           nonce): node 0 proves it holds the secret too,
//                                           over 32 random bytes the agent chose
//   agent -> SET gculaunch/auth/proof    hex HMAC-SHA256(secret, kAuthContext + nonce)
//   agent -> GET gculaunch/auth/status   <- "ok" once the proof was right
//
// The agent checks node 0's proof before it sends its own or believes anything node 0 says,
// so a listener that does not hold the secret learns no proof either.  The two proofs bind
// different contexts: neither side's proof can be reflected as the other's.  A wrong proof
// closes the connection (the protocol has no error reply).  The secret never crosses the
// wire, and a proof is good for the one nonce it answers.  The proofs authenticate the
// handshake, not the bytes after it (no channel binding): docs/security.md.
//
// Version skew: a node 0 from before node0-proof existed closes the connection at that
// request (its reserved keys); an agent from before it never asks, and node 0 does not
// insist (that agent trusts node 0 unproven, as it always did).  HMAC and the random
// bytes are OpenSSL's (libcrypto, linked statically, as it is for TLS elsewhere).
//
// Thread safety: pure functions (OpenSSL's RAND_bytes is thread safe).
#pragma once

#include <string>
#include <string_view>

namespace gculaunch::rendezvous {

/// The reserved keys the server answers itself (never stored).
inline constexpr std::string_view kAuthKeyPrefix = "gculaunch/auth/";
inline constexpr std::string_view kAuthNonceKey = "gculaunch/auth/nonce";
inline constexpr std::string_view kAuthProofKey = "gculaunch/auth/proof";
inline constexpr std::string_view kAuthStatusKey = "gculaunch/auth/status";
/// GET kNode0ProofPrefix + the agent's nonce: node 0's proof (NodeZeroProof).
inline constexpr std::string_view kNode0ProofPrefix = "gculaunch/auth/node0-proof/";
/// What GET gculaunch/auth/status answers once the connection proved the secret.
inline constexpr std::string_view kAuthOk = "ok";
/// Bound into every proof: a proof is for this protocol, not some other use of the secret.
inline constexpr std::string_view kAuthContext = "gculaunch agent proof v1\n";
/// Bound into node 0's proof; differs from kAuthContext, so that one proof is never the other.
inline constexpr std::string_view kNode0Context = "gculaunch node 0 proof v1\n";

/// 32 random bytes as 64 lower-case hex digits; "" if the random generator failed.
std::string NewAuthNonce();

/// hex(HMAC-SHA256(secret, kAuthContext + nonce)): 64 lower-case hex digits.
std::string AuthProof(std::string_view secret, std::string_view nonce);

/// Whether `proof` is AuthProof(secret, nonce), compared in constant time.  False for an
/// empty nonce.
bool VerifyAuthProof(std::string_view secret, std::string_view nonce, std::string_view proof);

/// Node 0's proof: hex(HMAC-SHA256(secret, kNode0Context + agent_nonce)).
std::string NodeZeroProof(std::string_view secret, std::string_view agent_nonce);

/// Whether `proof` is NodeZeroProof(secret, agent_nonce), compared in constant time.  False
/// for an empty nonce.
bool VerifyNodeZeroProof(std::string_view secret, std::string_view agent_nonce,
                         std::string_view proof);

/// Whether `nonce` is what an agent may ask node 0 to prove over: 32 to 128 lower-case hex
/// digits (node 0 signs nothing else).
bool IsAgentNonce(std::string_view nonce);

}  // namespace gculaunch::rendezvous
