// Three builds of the reduce kernels' inner loops: the baseline of the
// compile flags (x86-64-v2), AVX2 + F16C and AVX-512. Adds and divides are
// written once over GCC vector types and instantiated inside functions that
// carry a target attribute, so one source file yields all three without
// per-file compile flags; the 16-bit conversions use intrinsics. Every
// vector loop leaves its tail to the scalar code, which computes the same
// value per element.
#include "common/reduce_kernels_simd.h"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which
// -Wmaybe-uninitialized reports at every inlined use (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "common/reduce_kernels.h"

#define BPS_ALWAYS_INLINE inline __attribute__((always_inline))
#define BPS_TARGET_AVX2 __attribute__((target("avx2,f16c")))
#define BPS_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,f16c")))

namespace bps {
namespace reduce_simd {
namespace {

// ------------------------------------------------------------ generic bodies

// `Bytes`-wide vectors of T that may sit at any address (the inputs are
// element-aligned only) and alias T.
template <typename T, size_t Bytes>
struct Vec {
  typedef T Unaligned __attribute__((vector_size(Bytes), aligned(1), may_alias));
  static constexpr size_t kLanes = Bytes / sizeof(T);
};

// Four vectors per iteration (enough independent adds to hide the latency),
// then one at a time, then scalars.
template <typename T, size_t Bytes>
BPS_ALWAYS_INLINE void AddTwoBody(T* __restrict out, const T* __restrict x, const T* __restrict y, size_t n) {
  using V = typename Vec<T, Bytes>::Unaligned;
  constexpr size_t L = Vec<T, Bytes>::kLanes;
  size_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    const V a0 = *reinterpret_cast<const V*>(x + i), b0 = *reinterpret_cast<const V*>(y + i);
    const V a1 = *reinterpret_cast<const V*>(x + i + L), b1 = *reinterpret_cast<const V*>(y + i + L);
    const V a2 = *reinterpret_cast<const V*>(x + i + 2 * L), b2 = *reinterpret_cast<const V*>(y + i + 2 * L);
    const V a3 = *reinterpret_cast<const V*>(x + i + 3 * L), b3 = *reinterpret_cast<const V*>(y + i + 3 * L);
    *reinterpret_cast<V*>(out + i) = a0 + b0;
    *reinterpret_cast<V*>(out + i + L) = a1 + b1;
    *reinterpret_cast<V*>(out + i + 2 * L) = a2 + b2;
    *reinterpret_cast<V*>(out + i + 3 * L) = a3 + b3;
  }
  for (; i + L <= n; i += L) {
    *reinterpret_cast<V*>(out + i) = *reinterpret_cast<const V*>(x + i) + *reinterpret_cast<const V*>(y + i);
  }
  for (; i < n; ++i) out[i] = static_cast<T>(x[i] + y[i]);
}

// acc += src is out = acc + src with out == acc: the same loop, without the
// __restrict between acc and out.
template <typename T, size_t Bytes>
BPS_ALWAYS_INLINE void AddIntoBody(T* __restrict acc, const T* __restrict src, size_t n) {
  using V = typename Vec<T, Bytes>::Unaligned;
  constexpr size_t L = Vec<T, Bytes>::kLanes;
  size_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    const V a0 = *reinterpret_cast<const V*>(acc + i), b0 = *reinterpret_cast<const V*>(src + i);
    const V a1 = *reinterpret_cast<const V*>(acc + i + L), b1 = *reinterpret_cast<const V*>(src + i + L);
    const V a2 = *reinterpret_cast<const V*>(acc + i + 2 * L), b2 = *reinterpret_cast<const V*>(src + i + 2 * L);
    const V a3 = *reinterpret_cast<const V*>(acc + i + 3 * L), b3 = *reinterpret_cast<const V*>(src + i + 3 * L);
    *reinterpret_cast<V*>(acc + i) = a0 + b0;
    *reinterpret_cast<V*>(acc + i + L) = a1 + b1;
    *reinterpret_cast<V*>(acc + i + 2 * L) = a2 + b2;
    *reinterpret_cast<V*>(acc + i + 3 * L) = a3 + b3;
  }
  for (; i + L <= n; i += L) {
    *reinterpret_cast<V*>(acc + i) = *reinterpret_cast<const V*>(acc + i) + *reinterpret_cast<const V*>(src + i);
  }
  for (; i < n; ++i) acc[i] = static_cast<T>(acc[i] + src[i]);
}

// out may equal src (in-place average), so no __restrict here.
template <typename T, size_t Bytes>
BPS_ALWAYS_INLINE void DivideBody(T* out, const T* src, size_t n, T d) {
  using V = typename Vec<T, Bytes>::Unaligned;
  constexpr size_t L = Vec<T, Bytes>::kLanes;
  size_t i = 0;
  for (; i + L <= n; i += L) *reinterpret_cast<V*>(out + i) = *reinterpret_cast<const V*>(src + i) / d;
  for (; i < n; ++i) out[i] = src[i] / d;
}

// ------------------------------------------------------------ baseline

template <typename T>
void AddIntoBase(T* __restrict acc, const T* __restrict src, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] = static_cast<T>(acc[i] + src[i]);
}
template <typename T>
void AddTwoBase(T* __restrict out, const T* __restrict a, const T* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<T>(a[i] + b[i]);
}
template <typename T>
void DivideBase(T* out, const T* src, size_t n, T d) {
  for (size_t i = 0; i < n; ++i) out[i] = src[i] / d;
}
void F16ToF32Base(const uint16_t* __restrict s, float* __restrict d, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = HalfToFloat(s[i]);
}
void F32ToF16Base(const float* __restrict s, uint16_t* __restrict d, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = FloatToHalf(s[i]);
}
void Bf16ToF32Base(const uint16_t* __restrict s, float* __restrict d, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = BFloat16ToFloat(s[i]);
}
void F32ToBf16Base(const float* __restrict s, uint16_t* __restrict d, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = FloatToBFloat16(s[i]);
}
void AddF16IntoF32Base(float* __restrict acc, const uint16_t* __restrict s, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] += HalfToFloat(s[i]);
}
void AddBf16IntoF32Base(float* __restrict acc, const uint16_t* __restrict s, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] += BFloat16ToFloat(s[i]);
}

// ------------------------------------------------------------ AVX2 + F16C

template <typename T>
BPS_TARGET_AVX2 void AddIntoAvx2(T* __restrict acc, const T* __restrict src, size_t n) {
  AddIntoBody<T, 32>(acc, src, n);
}
template <typename T>
BPS_TARGET_AVX2 void AddTwoAvx2(T* __restrict out, const T* __restrict a, const T* __restrict b, size_t n) {
  AddTwoBody<T, 32>(out, a, b, n);
}
template <typename T>
BPS_TARGET_AVX2 void DivideAvx2(T* out, const T* src, size_t n, T d) {
  DivideBody<T, 32>(out, src, n, d);
}

// NaN lanes become sign | quiet NaN with an empty payload, which the
// conversion writes as sign|0x7e00: the scalar FloatToHalf's NaN.
BPS_TARGET_AVX2 BPS_ALWAYS_INLINE __m128i F32ToF16x8(__m256 x) {
  const __m256 sign = _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN)));
  const __m256 canonical = _mm256_or_ps(sign, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)));
  x = _mm256_blendv_ps(x, canonical, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  return _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

// Round to nearest even in the integer domain (as FloatToBFloat16 does);
// NaN keeps its top bits and gets the quiet bit.
BPS_TARGET_AVX2 BPS_ALWAYS_INLINE __m128i F32ToBf16x8(__m256 x) {
  const __m256i u = _mm256_castps_si256(x);
  const __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  const __m256i is_nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd)), 16);
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  const __m256i r = _mm256_blendv_epi8(rounded, quiet, is_nan);
  return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

BPS_TARGET_AVX2 BPS_ALWAYS_INLINE __m256 Bf16ToF32x8(const uint16_t* s) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

BPS_TARGET_AVX2 BPS_ALWAYS_INLINE __m256 F16ToF32x8(const uint16_t* s) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
}

BPS_TARGET_AVX2 void F16ToF32Avx2(const uint16_t* __restrict s, float* __restrict d, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, F16ToF32x8(s + i));
  F16ToF32Base(s + i, d + i, n - i);
}
BPS_TARGET_AVX2 void F32ToF16Avx2(const float* __restrict s, uint16_t* __restrict d, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), F32ToF16x8(_mm256_loadu_ps(s + i)));
  F32ToF16Base(s + i, d + i, n - i);
}
BPS_TARGET_AVX2 void Bf16ToF32Avx2(const uint16_t* __restrict s, float* __restrict d, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, Bf16ToF32x8(s + i));
  Bf16ToF32Base(s + i, d + i, n - i);
}
BPS_TARGET_AVX2 void F32ToBf16Avx2(const float* __restrict s, uint16_t* __restrict d, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), F32ToBf16x8(_mm256_loadu_ps(s + i)));
  F32ToBf16Base(s + i, d + i, n - i);
}
BPS_TARGET_AVX2 void AddF16IntoF32Avx2(float* __restrict acc, const uint16_t* __restrict s, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i), F16ToF32x8(s + i)));
  AddF16IntoF32Base(acc + i, s + i, n - i);
}
BPS_TARGET_AVX2 void AddBf16IntoF32Avx2(float* __restrict acc, const uint16_t* __restrict s, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i), Bf16ToF32x8(s + i)));
  AddBf16IntoF32Base(acc + i, s + i, n - i);
}

// ------------------------------------------------------------ AVX-512

template <typename T>
BPS_TARGET_AVX512 void AddIntoAvx512(T* __restrict acc, const T* __restrict src, size_t n) {
  AddIntoBody<T, 64>(acc, src, n);
}
template <typename T>
BPS_TARGET_AVX512 void AddTwoAvx512(T* __restrict out, const T* __restrict a, const T* __restrict b, size_t n) {
  AddTwoBody<T, 64>(out, a, b, n);
}
template <typename T>
BPS_TARGET_AVX512 void DivideAvx512(T* out, const T* src, size_t n, T d) {
  DivideBody<T, 64>(out, src, n, d);
}

BPS_TARGET_AVX512 BPS_ALWAYS_INLINE __m256i F32ToF16x16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i canonical = _mm512_or_si512(_mm512_and_si512(u, _mm512_set1_epi32(INT32_MIN)),
                                            _mm512_set1_epi32(0x7fc00000));
  x = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x, _mm512_castsi512_ps(canonical));
  return _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

BPS_TARGET_AVX512 BPS_ALWAYS_INLINE __m256i F32ToBf16x16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __mmask16 is_nan =
      _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  const __m512i high = _mm512_srli_epi32(u, 16);
  const __m512i odd = _mm512_and_si512(high, _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd)), 16);
  const __m512i quiet = _mm512_or_si512(high, _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(is_nan, rounded, quiet));
}

BPS_TARGET_AVX512 BPS_ALWAYS_INLINE __m512 Bf16ToF32x16(const uint16_t* s) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

BPS_TARGET_AVX512 BPS_ALWAYS_INLINE __m512 F16ToF32x16(const uint16_t* s) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s)));
}

BPS_TARGET_AVX512 void F16ToF32Avx512(const uint16_t* __restrict s, float* __restrict d, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(d + i, F16ToF32x16(s + i));
  F16ToF32Base(s + i, d + i, n - i);
}
BPS_TARGET_AVX512 void F32ToF16Avx512(const float* __restrict s, uint16_t* __restrict d, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), F32ToF16x16(_mm512_loadu_ps(s + i)));
  }
  F32ToF16Base(s + i, d + i, n - i);
}
BPS_TARGET_AVX512 void Bf16ToF32Avx512(const uint16_t* __restrict s, float* __restrict d, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(d + i, Bf16ToF32x16(s + i));
  Bf16ToF32Base(s + i, d + i, n - i);
}
BPS_TARGET_AVX512 void F32ToBf16Avx512(const float* __restrict s, uint16_t* __restrict d, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), F32ToBf16x16(_mm512_loadu_ps(s + i)));
  }
  F32ToBf16Base(s + i, d + i, n - i);
}
BPS_TARGET_AVX512 void AddF16IntoF32Avx512(float* __restrict acc, const uint16_t* __restrict s, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(acc + i, _mm512_add_ps(_mm512_loadu_ps(acc + i), F16ToF32x16(s + i)));
  AddF16IntoF32Base(acc + i, s + i, n - i);
}
BPS_TARGET_AVX512 void AddBf16IntoF32Avx512(float* __restrict acc, const uint16_t* __restrict s, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(acc + i, _mm512_add_ps(_mm512_loadu_ps(acc + i), Bf16ToF32x16(s + i)));
  }
  AddBf16IntoF32Base(acc + i, s + i, n - i);
}

}  // namespace

#define BPS_OPS(T, SUFFIX) \
  { &AddInto##SUFFIX<T>, &AddTwo##SUFFIX<T> }

const KernelTable kBaselineTable = {
    "baseline", BPS_OPS(float, Base), BPS_OPS(double, Base), BPS_OPS(int32_t, Base), BPS_OPS(int64_t, Base),
    BPS_OPS(uint8_t, Base), &DivideBase<float>, &DivideBase<double>, &F16ToF32Base, &F32ToF16Base,
    &Bf16ToF32Base, &F32ToBf16Base, &AddF16IntoF32Base, &AddBf16IntoF32Base,
};

const KernelTable kAvx2Table = {
    "avx2", BPS_OPS(float, Avx2), BPS_OPS(double, Avx2), BPS_OPS(int32_t, Avx2), BPS_OPS(int64_t, Avx2),
    BPS_OPS(uint8_t, Avx2), &DivideAvx2<float>, &DivideAvx2<double>, &F16ToF32Avx2, &F32ToF16Avx2,
    &Bf16ToF32Avx2, &F32ToBf16Avx2, &AddF16IntoF32Avx2, &AddBf16IntoF32Avx2,
};

const KernelTable kAvx512Table = {
    "avx512", BPS_OPS(float, Avx512), BPS_OPS(double, Avx512), BPS_OPS(int32_t, Avx512),
    BPS_OPS(int64_t, Avx512), BPS_OPS(uint8_t, Avx512), &DivideAvx512<float>, &DivideAvx512<double>,
    &F16ToF32Avx512, &F32ToF16Avx512, &Bf16ToF32Avx512, &F32ToBf16Avx512, &AddF16IntoF32Avx512,
    &AddBf16IntoF32Avx512,
};

#undef BPS_OPS

}  // namespace reduce_simd
}  // namespace bps
