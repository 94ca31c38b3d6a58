#include "common/reduce_kernels.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace bps {
namespace {

constexpr size_t kBlock = 2048;  // elements per L1-resident accumulator block

bool CpuHasF16C() {
  static const bool has = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx2");
  return has;
}

__attribute__((target("avx2,f16c"))) void HalfToFloatF16C(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) dst[i] = HalfToFloat(src[i]);
}

__attribute__((target("avx2,f16c"))) void FloatToHalfF16C(const float* src, uint16_t* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 f = _mm256_loadu_ps(src + i);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) dst[i] = FloatToHalf(src[i]);
}

void LoadToFloat(const void* src, float* dst, size_t n, DataType type) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  if (type == DataType::kBFloat16) {
    for (size_t i = 0; i < n; ++i) dst[i] = BFloat16ToFloat(s[i]);
  } else if (CpuHasF16C()) {
    HalfToFloatF16C(s, dst, n);
  } else {
    for (size_t i = 0; i < n; ++i) dst[i] = HalfToFloat(s[i]);
  }
}

void StoreFromFloat(const float* src, void* dst, size_t n, DataType type) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  if (type == DataType::kBFloat16) {
    for (size_t i = 0; i < n; ++i) d[i] = FloatToBFloat16(src[i]);
  } else if (CpuHasF16C()) {
    FloatToHalfF16C(src, d, n);
  } else {
    for (size_t i = 0; i < n; ++i) d[i] = FloatToHalf(src[i]);
  }
}

template <typename T>
__attribute__((target_clones("avx2", "default"))) void AddInto(T* __restrict acc, const T* __restrict src,
                                                                size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] += src[i];
}

template <typename T>
__attribute__((target_clones("avx2", "default"))) void AddTwo(T* __restrict out, const T* __restrict a,
                                                               const T* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

template <typename T>
void DivideInto(T* __restrict out, const T* __restrict src, size_t n, int64_t divisor) {
  if constexpr (std::is_floating_point_v<T>) {
    const T d = static_cast<T>(divisor);
    for (size_t i = 0; i < n; ++i) out[i] = src[i] / d;
  } else {
    const T d = static_cast<T>(divisor);
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<T>(src[i] / d);
  }
}

// Native-type reduce: sums in T, blocked so the partial sum stays in cache.
template <typename T>
void ReduceNative(const void* const* inputs, int num_inputs, size_t count, void* sum_out, void* avg_out,
                  int64_t divisor) {
  alignas(64) T block[kBlock];
  for (size_t base = 0; base < count; base += kBlock) {
    const size_t n = std::min(kBlock, count - base);
    const T* first = static_cast<const T*>(inputs[0]) + base;
    if (num_inputs >= 2) {
      AddTwo<T>(block, first, static_cast<const T*>(inputs[1]) + base, n);
    } else {
      memcpy(block, first, n * sizeof(T));
    }
    for (int k = 2; k < num_inputs; ++k) AddInto<T>(block, static_cast<const T*>(inputs[k]) + base, n);
    if (sum_out) memcpy(static_cast<T*>(sum_out) + base, block, n * sizeof(T));
    if (avg_out) {
      if (divisor == 1) {
        memcpy(static_cast<T*>(avg_out) + base, block, n * sizeof(T));
      } else {
        DivideInto<T>(static_cast<T*>(avg_out) + base, block, n, divisor);
      }
    }
  }
}

void ReduceHalf(const void* const* inputs, int num_inputs, size_t count, DataType type, void* sum_out,
                void* avg_out, int64_t divisor) {
  alignas(64) float acc[kBlock];
  alignas(64) float tmp[kBlock];
  for (size_t base = 0; base < count; base += kBlock) {
    const size_t n = std::min(kBlock, count - base);
    LoadToFloat(static_cast<const uint16_t*>(inputs[0]) + base, acc, n, type);
    for (int k = 1; k < num_inputs; ++k) {
      LoadToFloat(static_cast<const uint16_t*>(inputs[k]) + base, tmp, n, type);
      AddInto<float>(acc, tmp, n);
    }
    if (sum_out) StoreFromFloat(acc, static_cast<uint16_t*>(sum_out) + base, n, type);
    if (avg_out) {
      if (divisor != 1) DivideInto<float>(acc, acc, n, divisor);
      StoreFromFloat(acc, static_cast<uint16_t*>(avg_out) + base, n, type);
    }
  }
}

}  // namespace

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {  // subnormal or zero in half
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t exp = abs >> 23;
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // 14 - (exp - 127) ... into 10-bit mantissa
    uint32_t half_mant = mant >> (shift);
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++half_mant;
    return static_cast<uint16_t>(sign | half_mant);
  }
  uint32_t h = ((abs >> 13) - ((127 - 15) << 10));
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

void ReduceInputs(const void* const* inputs, int num_inputs, size_t count, DataType type, void* sum_out,
                  void* avg_out, int64_t divisor) {
  switch (type) {
    case DataType::kFloat32: return ReduceNative<float>(inputs, num_inputs, count, sum_out, avg_out, divisor);
    case DataType::kFloat64: return ReduceNative<double>(inputs, num_inputs, count, sum_out, avg_out, divisor);
    case DataType::kInt32: return ReduceNative<int32_t>(inputs, num_inputs, count, sum_out, avg_out, divisor);
    case DataType::kInt64: return ReduceNative<int64_t>(inputs, num_inputs, count, sum_out, avg_out, divisor);
    case DataType::kUInt8: return ReduceNative<uint8_t>(inputs, num_inputs, count, sum_out, avg_out, divisor);
    case DataType::kFloat16:
    case DataType::kBFloat16: return ReduceHalf(inputs, num_inputs, count, type, sum_out, avg_out, divisor);
  }
}

void CopyScaled(void* dst, const void* src, size_t count, DataType type, int64_t divisor) {
  if (divisor == 1) {
    if (dst != src) memmove(dst, src, count * DataTypeSize(type));
    return;
  }
  const void* inputs[1] = {src};
  ReduceInputs(inputs, 1, count, type, nullptr, dst, divisor);
}

void Accumulate(void* acc, const void* src, size_t count, DataType type, bool first) {
  if (IsHalfType(type)) {
    float* a = static_cast<float*>(acc);
    if (first) {
      LoadToFloat(src, a, count, type);
      return;
    }
    alignas(64) float tmp[kBlock];
    for (size_t base = 0; base < count; base += kBlock) {
      const size_t n = std::min(kBlock, count - base);
      LoadToFloat(static_cast<const uint16_t*>(src) + base, tmp, n, type);
      AddInto<float>(a + base, tmp, n);
    }
    return;
  }
  if (first) {
    memcpy(acc, src, count * DataTypeSize(type));
    return;
  }
  switch (type) {
    case DataType::kFloat32: return AddInto<float>(static_cast<float*>(acc), static_cast<const float*>(src), count);
    case DataType::kFloat64: return AddInto<double>(static_cast<double*>(acc), static_cast<const double*>(src), count);
    case DataType::kInt32: return AddInto<int32_t>(static_cast<int32_t*>(acc), static_cast<const int32_t*>(src), count);
    case DataType::kInt64: return AddInto<int64_t>(static_cast<int64_t*>(acc), static_cast<const int64_t*>(src), count);
    case DataType::kUInt8: return AddInto<uint8_t>(static_cast<uint8_t*>(acc), static_cast<const uint8_t*>(src), count);
    default: return;
  }
}

void AccumulatorToWire(void* dst, const void* acc, size_t count, DataType type) {
  if (IsHalfType(type)) {
    StoreFromFloat(static_cast<const float*>(acc), dst, count, type);
  } else if (dst != acc) {
    memcpy(dst, acc, count * DataTypeSize(type));
  }
}

}  // namespace bps
