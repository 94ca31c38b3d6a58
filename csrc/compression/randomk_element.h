// Per-element code of randomk's indices, shared by the host codec
// (randomk.cc) and the CUDA kernels (randomk.cu): see host_device.h.
//
// randomk sends k values at k distinct indices of [0, n) that every rank and
// server derives from (seed, key, round) and never sends: Floyd's sampling
// over a splitmix64 stream. For j = n - k .. n - 1 in turn it draws
// t_j = next() % (j + 1) and adds t_j, or j when t_j is taken already.
//
// The host runs that loop. A GPU cannot run it in parallel as written, but
// the stream is counter-based (draw d is Mix(start + (d + 1) * gamma)), so
// the set has a parallel form: with first[v] the first step j whose t_j is v
// (none: kNoDraw),
//   v < n - k is chosen iff first[v] exists (only a draw can add it, and the
//     first one does);
//   v >= n - k is chosen iff first[v] exists or step v collided;
//   step v collided iff t_v was taken before step v: first[t_v] < v, or
//     t_v >= n - k, t_v < v and step t_v collided (a chain of falling steps).
// tests/cpp/codec_agreement_test.cc checks that form against the loop.
#pragma once
#include <cstdint>

#include "compression/host_device.h"

namespace bps {
namespace element {

constexpr uint64_t kSplitMixGamma = 0x9E3779B97F4A7C15ull;
constexpr uint32_t kNoDraw = 0xffffffffu;

BPS_HOST_DEVICE inline uint64_t SplitMixOutput(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

BPS_HOST_DEVICE inline uint64_t RandomKStreamStart(uint32_t seed, uint64_t key, uint32_t round) {
  return key ^ (uint64_t{seed} << 32) ^ (uint64_t{round} * 0xD1B54A32D192ED03ull);
}

// t_j of step j (n - k <= j < n): the (j - (n - k))-th draw of the stream.
BPS_HOST_DEVICE inline uint32_t RandomKDraw(uint64_t start, uint32_t n, uint32_t k, uint32_t j) {
  const uint64_t draw = uint64_t{j} - (n - k);
  return static_cast<uint32_t>(SplitMixOutput(start + (draw + 1) * kSplitMixGamma) % (uint64_t{j} + 1));
}

BPS_HOST_DEVICE inline bool RandomKCollided(uint64_t start, uint32_t n, uint32_t k, const uint32_t* first, uint32_t v) {
  for (;;) {
    const uint32_t t = RandomKDraw(start, n, k, v);
    if (first[t] < v) return true;
    if (t >= n - k && t < v) {
      v = t;
      continue;
    }
    return false;
  }
}

BPS_HOST_DEVICE inline bool RandomKChosen(uint64_t start, uint32_t n, uint32_t k, const uint32_t* first, uint32_t v) {
  if (first[v] != kNoDraw) return true;
  return v >= n - k && RandomKCollided(start, n, k, first, v);
}

}  // namespace element
}  // namespace bps
