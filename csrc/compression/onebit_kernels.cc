#include "compression/onebit_kernels.h"

#include <immintrin.h>

#include <cmath>

namespace bps {
namespace onebit {
namespace {

inline float Signed(const uint8_t* bits, size_t i, float scale) { return (bits[i >> 3] >> (i & 7)) & 1 ? -scale : scale; }

void AddIntoBase(float* acc, const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] += x[i];
}
double AbsSumBase(const float* x, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += std::fabs(static_cast<double>(x[i]));
  return s;
}
void PackSignsBase(const float* x, size_t n, uint8_t* bits) {
  for (size_t b = 0; b < (n + 7) / 8; ++b) {
    uint8_t v = 0;
    for (size_t j = 0; j < 8 && b * 8 + j < n; ++j) v |= static_cast<uint8_t>(x[b * 8 + j] < 0.0f) << j;
    bits[b] = v;
  }
}
void UnpackSignsBase(const uint8_t* bits, size_t n, float scale, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = Signed(bits, i, scale);
}
void AddSignedBase(float* acc, const uint8_t* bits, size_t n, float scale) {
  for (size_t i = 0; i < n; ++i) acc[i] += Signed(bits, i, scale);
}
void SubtractSignedBase(float* acc, const uint8_t* bits, size_t n, float scale) {
  for (size_t i = 0; i < n; ++i) acc[i] -= Signed(bits, i, scale);
}

#define BPS_AVX2 __attribute__((target("avx2")))

BPS_AVX2 void AddIntoAvx2(float* acc, const float* x, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i), _mm256_loadu_ps(x + i)));
  AddIntoBase(acc + i, x + i, n - i);
}
BPS_AVX2 double AbsSumAvx2(const float* x, size_t n) {
  const __m256 mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + i), mask);
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(a)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)));
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(lo, hi));
  return lanes[0] + lanes[1] + lanes[2] + lanes[3] + AbsSumBase(x + i, n - i);
}
BPS_AVX2 void PackSignsAvx2(const float* x, size_t n, uint8_t* bits) {
  const __m256 zero = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    bits[i / 8] = static_cast<uint8_t>(_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), zero, _CMP_LT_OQ)));
  }
  if (i < n) PackSignsBase(x + i, n - i, bits + i / 8);
}
// +-scale for 8 elements: the bit moved into each lane's sign.
BPS_AVX2 inline __m256 SignedLanes(uint8_t byte, __m256 scale) {
  const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256i set = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(byte), lane_bit), lane_bit);
  const __m256 sign = _mm256_castsi256_ps(_mm256_slli_epi32(set, 31));
  return _mm256_xor_ps(scale, sign);
}
BPS_AVX2 void UnpackSignsAvx2(const uint8_t* bits, size_t n, float scale, float* out) {
  const __m256 s = _mm256_set1_ps(scale);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, SignedLanes(bits[i / 8], s));
  for (; i < n; ++i) out[i] = Signed(bits, i, scale);
}
BPS_AVX2 void AddSignedAvx2(float* acc, const uint8_t* bits, size_t n, float scale) {
  const __m256 s = _mm256_set1_ps(scale);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i), SignedLanes(bits[i / 8], s)));
  }
  for (; i < n; ++i) acc[i] += Signed(bits, i, scale);
}
BPS_AVX2 void SubtractSignedAvx2(float* acc, const uint8_t* bits, size_t n, float scale) {
  const __m256 s = _mm256_set1_ps(scale);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(acc + i, _mm256_sub_ps(_mm256_loadu_ps(acc + i), SignedLanes(bits[i / 8], s)));
  }
  for (; i < n; ++i) acc[i] -= Signed(bits, i, scale);
}

bool UseAvx2() {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2;
}

}  // namespace

void AddInto(float* acc, const float* x, size_t n) { UseAvx2() ? AddIntoAvx2(acc, x, n) : AddIntoBase(acc, x, n); }
double AbsSum(const float* x, size_t n) { return UseAvx2() ? AbsSumAvx2(x, n) : AbsSumBase(x, n); }
void PackSigns(const float* x, size_t n, uint8_t* bits) { UseAvx2() ? PackSignsAvx2(x, n, bits) : PackSignsBase(x, n, bits); }
void UnpackSigns(const uint8_t* bits, size_t n, float scale, float* out) {
  UseAvx2() ? UnpackSignsAvx2(bits, n, scale, out) : UnpackSignsBase(bits, n, scale, out);
}
void AddSigned(float* acc, const uint8_t* bits, size_t n, float scale) {
  UseAvx2() ? AddSignedAvx2(acc, bits, n, scale) : AddSignedBase(acc, bits, n, scale);
}
void SubtractSigned(float* acc, const uint8_t* bits, size_t n, float scale) {
  UseAvx2() ? SubtractSignedAvx2(acc, bits, n, scale) : SubtractSignedBase(acc, bits, n, scale);
}
const char* KernelName() { return UseAvx2() ? "avx2" : "baseline"; }

}  // namespace onebit
}  // namespace bps
