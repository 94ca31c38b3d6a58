// Deterministic 64-bit hashing of tensor names into partition keys. Keys come
// from names (not submission order) so ranks may submit tensors in any order.
#pragma once
#include <cstdint>
#include <string>

namespace bps {

// FNV-1a 64 followed by a murmur finaliser: stable across processes/builds.
inline uint64_t HashName(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

inline uint64_t MixKey(uint64_t name_hash, uint32_t partition, uint32_t slice) {
  uint64_t h = name_hash ^ (static_cast<uint64_t>(partition) * 0x9e3779b97f4a7c15ull) ^
               (static_cast<uint64_t>(slice) * 0xc2b2ae3d27d4eb4full);
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  return h;
}

}  // namespace bps
