// SHA-256 and HMAC-SHA256 for the connection handshake (no OpenSSL needed).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace bps {

using Digest256 = std::array<uint8_t, 32>;

Digest256 Sha256(const void* data, size_t len);
Digest256 HmacSha256(const std::string& key, const void* data, size_t len);
// Constant-time comparison: a mismatching MAC must not leak its prefix length.
bool DigestEqual(const Digest256& a, const Digest256& b);
std::string ToHex(const void* data, size_t len);
// Random bytes from the kernel (getrandom); used for nonces, tokens, job ids.
void SecureRandom(void* out, size_t len);

}  // namespace bps
