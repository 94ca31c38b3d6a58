#include "common/reduce_kernels.h"

#include <cpuid.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <type_traits>

#include "common/reduce_kernels_simd.h"

namespace bps {
namespace {

using reduce_simd::KernelTable;
using reduce_simd::Ops;

constexpr size_t kBlock = 2048;  // elements per L1-resident accumulator block

const KernelTable* TableFor(ReduceIsa isa) {
  switch (isa) {
    case ReduceIsa::kAvx512: return &reduce_simd::kAvx512Table;
    case ReduceIsa::kAvx2: return &reduce_simd::kAvx2Table;
    case ReduceIsa::kBaseline: break;
  }
  return &reduce_simd::kBaselineTable;
}

// Chosen once; a test may switch it (SetReduceIsaForTesting).
std::atomic<int> g_active_isa{-1};

ReduceIsa Active() {
  int isa = g_active_isa.load(std::memory_order_relaxed);
  if (isa < 0) {
    isa = static_cast<int>(DefaultReduceIsa());
    g_active_isa.store(isa, std::memory_order_relaxed);
  }
  return static_cast<ReduceIsa>(isa);
}

const KernelTable& Kernels() { return *TableFor(Active()); }

// From CPUID leaf 1 (clang's __builtin_cpu_supports has no "f16c"); the OS's
// saving of the AVX state is covered by the "avx2" check beside it.
bool CpuHasF16C() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
}

template <typename T>
const Ops<T>& OpsOf(const KernelTable& k) {
  if constexpr (std::is_same_v<T, float>) return k.f32;
  else if constexpr (std::is_same_v<T, double>) return k.f64;
  else if constexpr (std::is_same_v<T, int32_t>) return k.i32;
  else if constexpr (std::is_same_v<T, int64_t>) return k.i64;
  else return k.u8;
}

void LoadToFloat(const KernelTable& k, const void* src, float* dst, size_t n, DataType type) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  (type == DataType::kBFloat16 ? k.bf16_to_f32 : k.f16_to_f32)(s, dst, n);
}

void AddHalfInto(const KernelTable& k, float* acc, const void* src, size_t n, DataType type) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  (type == DataType::kBFloat16 ? k.add_bf16_into_f32 : k.add_f16_into_f32)(acc, s, n);
}

void StoreFromFloat(const KernelTable& k, const float* src, void* dst, size_t n, DataType type) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  (type == DataType::kBFloat16 ? k.f32_to_bf16 : k.f32_to_f16)(src, d, n);
}

template <typename T>
void DivideInto(const KernelTable& k, T* out, const T* src, size_t n, int64_t divisor) {
  if constexpr (std::is_same_v<T, float>) {
    k.divide_f32(out, src, n, static_cast<float>(divisor));
  } else if constexpr (std::is_same_v<T, double>) {
    k.divide_f64(out, src, n, static_cast<double>(divisor));
  } else {
    // No x86 level divides integers in vectors: one scalar loop for all.
    const T d = static_cast<T>(divisor);
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<T>(src[i] / d);
  }
}

// Native-type reduce: sums in T, blocked so the partial sum stays in cache.
template <typename T>
void ReduceNative(const void* const* inputs, int num_inputs, size_t count, void* sum_out, void* avg_out,
                  int64_t divisor) {
  const KernelTable& k = Kernels();
  const Ops<T>& ops = OpsOf<T>(k);
  alignas(64) T block[kBlock];
  for (size_t base = 0; base < count; base += kBlock) {
    const size_t n = std::min(kBlock, count - base);
    const T* first = static_cast<const T*>(inputs[0]) + base;
    if (num_inputs >= 2) {
      ops.add_two(block, first, static_cast<const T*>(inputs[1]) + base, n);
    } else {
      memcpy(block, first, n * sizeof(T));
    }
    for (int j = 2; j < num_inputs; ++j) ops.add_into(block, static_cast<const T*>(inputs[j]) + base, n);
    if (sum_out) memcpy(static_cast<T*>(sum_out) + base, block, n * sizeof(T));
    if (avg_out) {
      if (divisor == 1) {
        memcpy(static_cast<T*>(avg_out) + base, block, n * sizeof(T));
      } else {
        DivideInto<T>(k, static_cast<T*>(avg_out) + base, block, n, divisor);
      }
    }
  }
}

void ReduceHalf(const void* const* inputs, int num_inputs, size_t count, DataType type, void* sum_out,
                void* avg_out, int64_t divisor) {
  const KernelTable& k = Kernels();
  alignas(64) float acc[kBlock];
  for (size_t base = 0; base < count; base += kBlock) {
    const size_t n = std::min(kBlock, count - base);
    LoadToFloat(k, static_cast<const uint16_t*>(inputs[0]) + base, acc, n, type);
    for (int j = 1; j < num_inputs; ++j) AddHalfInto(k, acc, static_cast<const uint16_t*>(inputs[j]) + base, n, type);
    if (sum_out) StoreFromFloat(k, acc, static_cast<uint16_t*>(sum_out) + base, n, type);
    if (avg_out) {
      if (divisor != 1) DivideInto<float>(k, acc, acc, n, divisor);
      StoreFromFloat(k, acc, static_cast<uint16_t*>(avg_out) + base, n, type);
    }
  }
}

template <typename T>
void AccumulateNative(void* acc, const void* src, size_t count) {
  OpsOf<T>(Kernels()).add_into(static_cast<T*>(acc), static_cast<const T*>(src), count);
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
    const KernelTable& k = Kernels();
    float* a = static_cast<float*>(acc);
    if (first) {
      LoadToFloat(k, src, a, count, type);
    } else {
      AddHalfInto(k, a, src, count, type);
    }
    return;
  }
  if (first) {
    memcpy(acc, src, count * DataTypeSize(type));
    return;
  }
  switch (type) {
    case DataType::kFloat32: return AccumulateNative<float>(acc, src, count);
    case DataType::kFloat64: return AccumulateNative<double>(acc, src, count);
    case DataType::kInt32: return AccumulateNative<int32_t>(acc, src, count);
    case DataType::kInt64: return AccumulateNative<int64_t>(acc, src, count);
    case DataType::kUInt8: return AccumulateNative<uint8_t>(acc, src, count);
    default: return;
  }
}

void AccumulatorToWire(void* dst, const void* acc, size_t count, DataType type) {
  if (IsHalfType(type)) {
    StoreFromFloat(Kernels(), static_cast<const float*>(acc), dst, count, type);
  } else if (dst != acc) {
    memcpy(dst, acc, count * DataTypeSize(type));
  }
}

const char* ReduceIsaName(ReduceIsa isa) { return TableFor(isa)->name; }

ReduceIsa BestSupportedReduceIsa() {
  static const ReduceIsa best = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl")) {
      return ReduceIsa::kAvx512;
    }
    if (__builtin_cpu_supports("avx2") && CpuHasF16C()) return ReduceIsa::kAvx2;
    return ReduceIsa::kBaseline;
  }();
  return best;
}

ReduceIsa DefaultReduceIsa() {
  return BestSupportedReduceIsa() >= ReduceIsa::kAvx2 ? ReduceIsa::kAvx2 : ReduceIsa::kBaseline;
}

ReduceIsa ActiveReduceIsa() { return Active(); }

bool SetReduceIsaForTesting(ReduceIsa isa) {
  if (static_cast<int>(isa) > static_cast<int>(BestSupportedReduceIsa())) return false;
  g_active_isa.store(static_cast<int>(isa), std::memory_order_relaxed);
  return true;
}

}  // namespace bps
