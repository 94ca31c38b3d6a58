// Element types the engine moves and sums, and their properties.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace bps {

// The values are the wire's and the C ABI's bps_dtype (c_api/abi_types.h
// holds the two together): never renumber one.
enum class DataType : uint8_t {
  kFloat32 = 0,
  kFloat64 = 1,
  kFloat16 = 2,
  kBFloat16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kUInt8 = 6,
};

constexpr int kNumDataTypes = 7;

inline bool IsValidDataType(int v) { return v >= 0 && v < kNumDataTypes; }

inline size_t DataTypeSize(DataType t) {
  switch (t) {
    case DataType::kFloat32: return 4;
    case DataType::kFloat64: return 8;
    case DataType::kFloat16: return 2;
    case DataType::kBFloat16: return 2;
    case DataType::kInt32: return 4;
    case DataType::kInt64: return 8;
    case DataType::kUInt8: return 1;
  }
  return 0;
}

inline const char* DataTypeName(DataType t) {
  switch (t) {
    case DataType::kFloat32: return "float32";
    case DataType::kFloat64: return "float64";
    case DataType::kFloat16: return "float16";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kUInt8: return "uint8";
  }
  return "unknown";
}

// 16-bit floats are summed in float32 (on servers and in local reduces).
inline bool IsHalfType(DataType t) { return t == DataType::kFloat16 || t == DataType::kBFloat16; }

}  // namespace bps
