// Per-element code of onebit, shared by the host codec (onebit.cc and the
// scalar loops of onebit_kernels.cc) and the CUDA kernels (onebit.cu): see
// host_device.h. The wire format is compressor.h's: bit i%8 of byte i/8 set
// when x[i] < 0, so 32 elements make one little-endian 32-bit word with
// element 32w + j at bit j (onebit.cu: a warp's ballot, lane j's bit j).
#pragma once
#include <cstdint>

#include "compression/host_device.h"

namespace bps {
namespace element {

// -0.0 and NaN count as positive.
BPS_HOST_DEVICE inline bool OneBitNegative(float x) { return x < 0.0f; }

BPS_HOST_DEVICE inline float OneBitSigned(const uint8_t* bits, uint32_t i, float scale) {
  return (bits[i >> 3] >> (i & 7)) & 1 ? -scale : scale;
}

// The segment of element i among a slice's ascending cuts (segment s is
// [cuts[s - 1], cuts[s]), the first from 0, the last to the slice's end).
BPS_HOST_DEVICE inline uint32_t OneBitSegmentOf(const uint32_t* cuts, uint32_t num_cuts, uint32_t i) {
  uint32_t lo = 0, hi = num_cuts;  // the first cut > i
  while (lo < hi) {
    const uint32_t mid = (lo + hi) / 2;
    if (cuts[mid] <= i) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}
BPS_HOST_DEVICE inline uint32_t OneBitSegmentBegin(const uint32_t* cuts, uint32_t s) { return s == 0 ? 0 : cuts[s - 1]; }
BPS_HOST_DEVICE inline uint32_t OneBitSegmentEnd(const uint32_t* cuts, uint32_t num_cuts, uint32_t s, uint32_t n) {
  return s == num_cuts ? n : cuts[s];
}

// A segment's scale: mean |c| over it, summed in double precision (the sum's
// order differs between the AVX2 loop and a GPU reduction: the scales agree
// to float32 rounding, the sign bits exactly).
BPS_HOST_DEVICE inline double OneBitAbs(float x) { return x < 0.0f ? -static_cast<double>(x) : static_cast<double>(x); }
BPS_HOST_DEVICE inline float OneBitScale(double abs_sum, uint32_t count) {
  return static_cast<float>(abs_sum / count);
}

}  // namespace element
}  // namespace bps
