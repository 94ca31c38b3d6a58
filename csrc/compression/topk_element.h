// Per-element code of topk's selection, shared by the host codec
// (topk_select.cc) and the CUDA kernels (topk.cu): see host_device.h.
//
// topk sends the k largest |x|, ties to the lower index. The selection is a
// radix select on the bit pattern of |x| (the float with its sign bit
// cleared): for non-negative floats the pattern, read as an unsigned
// integer, orders as the value does, so three passes of histograms over its
// digits find the k-th largest key T in linear time. The chosen elements are
// then those with key > T, and the first (k - #{key > T}) of those with
// key == T in index order: the tie rule. NaN's pattern lies above infinity's,
// so a NaN counts as the largest (the comparison sort before it had no order
// for NaN).
#pragma once
#include <cstdint>

#include "compression/host_device.h"

namespace bps {
namespace element {

BPS_HOST_DEVICE inline uint32_t TopKKey(float x) {
  union {
    float f;
    uint32_t u;
  } bits;
  bits.f = x;
  return bits.u & 0x7fffffffu;
}

// The key's 31 bits as three digits, most significant first: bits 30..20
// (2048 values), 19..10 and 9..0 (1024 each).
constexpr int kTopKPasses = 3;
constexpr uint32_t kTopKMaxBins = 2048;
BPS_HOST_DEVICE inline uint32_t TopKDigitShift(int pass) { return pass == 0 ? 20u : pass == 1 ? 10u : 0u; }
BPS_HOST_DEVICE inline uint32_t TopKDigitBins(int pass) { return pass == 0 ? 2048u : 1024u; }
BPS_HOST_DEVICE inline uint32_t TopKDigit(uint32_t key, int pass) {
  return (key >> TopKDigitShift(pass)) & (TopKDigitBins(pass) - 1);
}
// Whether key agrees with the digits found so far (prefix holds them in
// place, passes before `pass`).
BPS_HOST_DEVICE inline bool TopKMatchesPrefix(uint32_t key, uint32_t prefix, int pass) {
  if (pass == 0) return true;
  const uint32_t shift = TopKDigitShift(pass - 1);
  return (key >> shift) == (prefix >> shift);
}

// One pass's choice: given the histogram of the candidates' digits and how
// many of the k remain to be found among them (`wanted` >= 1), the digit of
// the k-th largest, and how many candidates lie in higher bins (all chosen).
BPS_HOST_DEVICE inline void TopKPickBin(const uint32_t* histogram, uint32_t bins, uint32_t wanted, uint32_t* bin,
                                        uint32_t* above) {
  uint32_t higher = 0;
  for (uint32_t b = bins; b-- > 0;) {
    if (higher + histogram[b] >= wanted) {
      *bin = b;
      *above = higher;
      return;
    }
    higher += histogram[b];
  }
  *bin = 0;
  *above = higher;
}

// Whether an element is chosen, given the threshold key, its rank among the
// elements whose key equals the threshold (in index order) and how many of
// those are taken.
BPS_HOST_DEVICE inline bool TopKChosen(uint32_t key, uint32_t threshold, uint32_t equal_rank, uint32_t equal_taken) {
  return key > threshold || (key == threshold && equal_rank < equal_taken);
}

}  // namespace element
}  // namespace bps
