// The inner loops of the reduce kernels, once per x86 instruction-set level.
// reduce_kernels.cc blocks the work and picks one table at first use
// (__builtin_cpu_supports); every table gives bit-identical results: element
// i of a sum is always ((in0 + in1) + in2) + ..., one IEEE add per step in
// the same order, and 16-bit conversions round to nearest even with NaN
// written as sign|0x7e00 (float16) or the quieted input (bfloat16).
#pragma once
#include <cstddef>
#include <cstdint>

namespace bps {
namespace reduce_simd {

template <typename T>
struct Ops {
  void (*add_into)(T* __restrict acc, const T* __restrict src, size_t n);  // acc += src
  void (*add_two)(T* __restrict out, const T* __restrict a, const T* __restrict b, size_t n);  // out = a + b
};

struct KernelTable {
  const char* name;
  Ops<float> f32;
  Ops<double> f64;
  Ops<int32_t> i32;
  Ops<int64_t> i64;
  Ops<uint8_t> u8;
  void (*divide_f32)(float* out, const float* src, size_t n, float divisor);  // out may equal src
  void (*divide_f64)(double* out, const double* src, size_t n, double divisor);
  void (*f16_to_f32)(const uint16_t* __restrict src, float* __restrict dst, size_t n);
  void (*f32_to_f16)(const float* __restrict src, uint16_t* __restrict dst, size_t n);
  void (*bf16_to_f32)(const uint16_t* __restrict src, float* __restrict dst, size_t n);
  void (*f32_to_bf16)(const float* __restrict src, uint16_t* __restrict dst, size_t n);
  void (*add_f16_into_f32)(float* __restrict acc, const uint16_t* __restrict src, size_t n);  // acc += f32(src)
  void (*add_bf16_into_f32)(float* __restrict acc, const uint16_t* __restrict src, size_t n);
};

// x86-64-v2 (the build's baseline): plain loops, SSE at most, scalar 16-bit conversions.
extern const KernelTable kBaselineTable;
// AVX2 + F16C, 256-bit.
extern const KernelTable kAvx2Table;
// AVX-512 F/BW/VL, 512-bit.
extern const KernelTable kAvx512Table;

}  // namespace reduce_simd
}  // namespace bps
