// The node agents' proof of the job secret (--job-secret-file; docs/tcpstore-protocol.md
// section 8.5): a challenge and response inside the TCPStore protocol, so that torch's
// clients, which cannot authenticate, see the store they always saw.
//
//   agent -> GET gculaunch/auth/nonce    <- 64 hex digits: 32 random bytes, new for each GET
//                                           of this connection ("" when the store has no
//                                           secret)
//   agent -> SET gculaunch/auth/proof    hex HMAC-SHA256(secret, kAuthContext + nonce)
//   agent -> GET gculaunch/auth/status   <- "ok" once the proof was right
//
// A wrong proof closes the connection (the protocol has no error reply).  The secret never
// crosses the wire, and a proof is good for the one nonce it answers.  HMAC and the random
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
/// What GET gculaunch/auth/status answers once the connection proved the secret.
inline constexpr std::string_view kAuthOk = "ok";
/// Bound into every proof: a proof is for this protocol, not some other use of the secret.
inline constexpr std::string_view kAuthContext = "gculaunch agent proof v1\n";

/// 32 random bytes as 64 lower-case hex digits; "" if the random generator failed.
std::string NewAuthNonce();

/// hex(HMAC-SHA256(secret, kAuthContext + nonce)): 64 lower-case hex digits.
std::string AuthProof(std::string_view secret, std::string_view nonce);

/// Whether `proof` is AuthProof(secret, nonce), compared in constant time.  False for an
/// empty nonce.
bool VerifyAuthProof(std::string_view secret, std::string_view nonce, std::string_view proof);

}  // namespace gculaunch::rendezvous
