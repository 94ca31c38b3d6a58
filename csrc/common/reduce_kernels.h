// Vectorised element-wise kernels used by the local reduce and the servers.
// All are blocked so intermediate float32 accumulators stay in L1. The inner
// loops exist per x86 level (reduce_kernels_simd.h); one is chosen at first
// use (DefaultReduceIsa), and all give bit-identical results.
#pragma once
#include <cstddef>
#include <cstdint>

#include "common/dtype.h"

namespace bps {

// Instruction-set levels of the inner loops, in increasing order.
enum class ReduceIsa : uint8_t { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };
#define BPS_REDUCE_KERNELS_HAVE_ISA 1  // for benchmarks built against older trees too
const char* ReduceIsaName(ReduceIsa isa);
// The highest level this CPU runs: avx512 needs AVX-512 F/BW/VL, avx2 needs AVX2 and F16C.
ReduceIsa BestSupportedReduceIsa();
// The level the kernels use unless a test chose another: AVX2 where the CPU
// has it, even where it has AVX-512. Measured on Zen 4
// (docs/performance.md, "Summation kernels"): at partition sizes (MBs, out
// of L2) the 512-bit loops were never faster and up to 1.6x slower.
ReduceIsa DefaultReduceIsa();
// The level in use.
ReduceIsa ActiveReduceIsa();
// Tests and benchmarks: run every kernel at `isa` from now on. Returns false,
// and changes nothing, where this CPU lacks it. Not for use while kernels run.
bool SetReduceIsaForTesting(ReduceIsa isa);

// out = sum_i inputs[i]  (num_inputs >= 1), written to `sum_out` unscaled
// and/or to `avg_out` divided by `divisor`; either output may be null and
// either may alias inputs[0]. 16-bit floats accumulate in float32; integers
// wrap; integer division truncates toward zero.
void ReduceInputs(const void* const* inputs, int num_inputs, size_t count, DataType type, void* sum_out,
                  void* avg_out, int64_t divisor);

// dst = src / divisor (divisor 1: plain copy). dst may equal src.
void CopyScaled(void* dst, const void* src, size_t count, DataType type, int64_t divisor);

// Server accumulation. `acc` is float32 for 16-bit types, else `type` itself.
// first: acc = src, else acc += src.
void Accumulate(void* acc, const void* src, size_t count, DataType type, bool first);
// Convert an accumulator into wire format (no-op copy for non-16-bit types).
void AccumulatorToWire(void* dst, const void* acc, size_t count, DataType type);
inline size_t AccumulatorElementSize(DataType type) { return IsHalfType(type) ? 4 : DataTypeSize(type); }

// Scalar conversions (exported for tests and adapters).
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
inline float BFloat16ToFloat(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
inline uint16_t FloatToBFloat16(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace bps
