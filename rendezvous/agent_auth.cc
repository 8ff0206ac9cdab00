#include "rendezvous/agent_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <array>

namespace gculaunch::rendezvous {
namespace {

std::string Hex(const unsigned char* bytes, std::size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * size);
  for (std::size_t i = 0; i < size; ++i) {
    out += kDigits[bytes[i] >> 4];
    out += kDigits[bytes[i] & 0xf];
  }
  return out;
}

std::string Mac(std::string_view secret, std::string_view context, std::string_view nonce) {
  std::string message(context);
  message += nonce;
  std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
  unsigned int size = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac.data(),
           &size) == nullptr) {
    return "";
  }
  return Hex(mac.data(), size);
}

bool SameMac(const std::string& expected, std::string_view proof) {
  if (expected.empty() || proof.size() != expected.size()) return false;
  return CRYPTO_memcmp(expected.data(), proof.data(), expected.size()) == 0;
}

}  // namespace

std::string NewAuthNonce() {
  std::array<unsigned char, 32> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) return "";
  return Hex(bytes.data(), bytes.size());
}

std::string AuthProof(std::string_view secret, std::string_view nonce) {
  return Mac(secret, kAuthContext, nonce);
}

bool VerifyAuthProof(std::string_view secret, std::string_view nonce, std::string_view proof) {
  return !nonce.empty() && SameMac(AuthProof(secret, nonce), proof);
}

std::string NodeZeroProof(std::string_view secret, std::string_view agent_nonce) {
  return Mac(secret, kNode0Context, agent_nonce);
}

bool VerifyNodeZeroProof(std::string_view secret, std::string_view agent_nonce,
                         std::string_view proof) {
  return !agent_nonce.empty() && SameMac(NodeZeroProof(secret, agent_nonce), proof);
}

bool IsAgentNonce(std::string_view nonce) {
  if (nonce.size() < 32 || nonce.size() > 128) return false;
  for (char c : nonce) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace gculaunch::rendezvous
