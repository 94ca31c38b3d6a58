// The dense loops of the compressors (onebit and error feedback), which touch
// every element of every pushed slice: AVX2 where the CPU has it, plain
// loops otherwise, chosen once at first use (__builtin_cpu_supports, as the
// reduce kernels do). Both give identical results except AbsSum, which adds
// in double precision in a different order (exact to float32's rounding).
#pragma once
#include <cstddef>
#include <cstdint>

namespace bps {
namespace onebit {

void AddInto(float* acc, const float* x, size_t n);  // acc += x
double AbsSum(const float* x, size_t n);
// bit i%8 of bits[i/8] = x[i] < 0 (so -0.0 and NaN count as positive).
void PackSigns(const float* x, size_t n, uint8_t* bits);
void UnpackSigns(const uint8_t* bits, size_t n, float scale, float* out);  // out = +-scale
void AddSigned(float* acc, const uint8_t* bits, size_t n, float scale);    // acc += +-scale
void SubtractSigned(float* acc, const uint8_t* bits, size_t n, float scale);  // acc -= +-scale
// "avx2" or "baseline": which loops run (tests and stats).
const char* KernelName();

}  // namespace onebit
}  // namespace bps
