// Reduce kernels against a scalar reference, for every dtype, for sum and
// average, over sizes that hit the vector body and the scalar tail.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "common/reduce_kernels.h"

namespace bps {
namespace {

// Element i of input j, chosen so sums are exact in every dtype.
double Value(int j, size_t i, DataType t) {
  if (t == DataType::kUInt8) return static_cast<double>((i + 3 * j) % 50);
  return static_cast<double>(static_cast<int>((i * 7 + j * 13) % 41) - 20);
}

void Store(DataType t, void* base, size_t i, double v) {
  switch (t) {
    case DataType::kFloat32: static_cast<float*>(base)[i] = static_cast<float>(v); break;
    case DataType::kFloat64: static_cast<double*>(base)[i] = v; break;
    case DataType::kFloat16: static_cast<uint16_t*>(base)[i] = FloatToHalf(static_cast<float>(v)); break;
    case DataType::kBFloat16: static_cast<uint16_t*>(base)[i] = FloatToBFloat16(static_cast<float>(v)); break;
    case DataType::kInt32: static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v); break;
    case DataType::kInt64: static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v); break;
    case DataType::kUInt8: static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v); break;
  }
}

double Load(DataType t, const void* base, size_t i) {
  switch (t) {
    case DataType::kFloat32: return static_cast<const float*>(base)[i];
    case DataType::kFloat64: return static_cast<const double*>(base)[i];
    case DataType::kFloat16: return HalfToFloat(static_cast<const uint16_t*>(base)[i]);
    case DataType::kBFloat16: return BFloat16ToFloat(static_cast<const uint16_t*>(base)[i]);
    case DataType::kInt32: return static_cast<const int32_t*>(base)[i];
    case DataType::kInt64: return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case DataType::kUInt8: return static_cast<const uint8_t*>(base)[i];
  }
  return 0;
}

bool IsFloat(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat64 || IsHalfType(t);
}

// What dividing the exact sum by `divisor` must give in dtype t.
double ExpectedAverage(DataType t, double sum, int64_t divisor) {
  if (IsFloat(t)) return sum / static_cast<double>(divisor);
  return std::trunc(sum / static_cast<double>(divisor));  // integers truncate toward zero
}

double Tolerance(DataType t, double magnitude) {
  if (t == DataType::kFloat16) return 1e-3 * std::max(1.0, std::fabs(magnitude));
  if (t == DataType::kBFloat16) return 8e-3 * std::max(1.0, std::fabs(magnitude));
  if (t == DataType::kFloat32) return 1e-6 * std::max(1.0, std::fabs(magnitude));
  return 0;
}

class ReduceKernels : public ::testing::TestWithParam<DataType> {};

TEST_P(ReduceKernels, SumAndAverageMatchTheReference) {
  const DataType t = GetParam();
  const size_t esz = DataTypeSize(t);
  for (size_t count : {size_t(1), size_t(7), size_t(64), size_t(1000), size_t(70001)}) {
    for (int n : {1, 2, 3, 8}) {
      std::vector<std::vector<char>> in(n, std::vector<char>(count * esz));
      const void* ptrs[16];
      for (int j = 0; j < n; ++j) {
        for (size_t i = 0; i < count; ++i) Store(t, in[j].data(), i, Value(j, i, t));
        ptrs[j] = in[j].data();
      }
      const int64_t divisor = 3;
      std::vector<char> sum(count * esz), avg(count * esz);
      ReduceInputs(ptrs, n, count, t, sum.data(), avg.data(), divisor);
      for (size_t i = 0; i < count; ++i) {
        double exact = 0;
        for (int j = 0; j < n; ++j) exact += Value(j, i, t);
        if (t == DataType::kUInt8) exact = static_cast<double>(static_cast<uint8_t>(static_cast<int>(exact)));
        ASSERT_NEAR(Load(t, sum.data(), i), exact, Tolerance(t, exact))
            << DataTypeName(t) << " sum, count " << count << " inputs " << n << " at " << i;
        const double want = ExpectedAverage(t, exact, divisor);
        ASSERT_NEAR(Load(t, avg.data(), i), want, Tolerance(t, want) + (IsFloat(t) ? 0 : 0))
            << DataTypeName(t) << " average, count " << count << " inputs " << n << " at " << i;
      }
    }
  }
}

TEST_P(ReduceKernels, SumInPlaceOverTheFirstInput) {
  const DataType t = GetParam();
  const size_t esz = DataTypeSize(t), count = 513;
  std::vector<char> a(count * esz), b(count * esz);
  for (size_t i = 0; i < count; ++i) {
    Store(t, a.data(), i, Value(0, i, t));
    Store(t, b.data(), i, Value(1, i, t));
  }
  const void* ptrs[2] = {a.data(), b.data()};
  ReduceInputs(ptrs, 2, count, t, a.data(), nullptr, 1);
  for (size_t i = 0; i < count; ++i) {
    double exact = Value(0, i, t) + Value(1, i, t);
    ASSERT_NEAR(Load(t, a.data(), i), exact, Tolerance(t, exact)) << DataTypeName(t) << " at " << i;
  }
}

TEST_P(ReduceKernels, CopyScaledDividesOrCopies) {
  const DataType t = GetParam();
  const size_t esz = DataTypeSize(t), count = 301;
  std::vector<char> src(count * esz), dst(count * esz);
  for (size_t i = 0; i < count; ++i) Store(t, src.data(), i, Value(2, i, t));
  CopyScaled(dst.data(), src.data(), count, t, 1);
  EXPECT_EQ(memcmp(dst.data(), src.data(), count * esz), 0);
  CopyScaled(dst.data(), src.data(), count, t, 4);
  for (size_t i = 0; i < count; ++i) {
    const double want = ExpectedAverage(t, Value(2, i, t), 4);
    ASSERT_NEAR(Load(t, dst.data(), i), want, Tolerance(t, want)) << DataTypeName(t) << " at " << i;
  }
}

TEST_P(ReduceKernels, ServerAccumulatorRoundTrips) {
  const DataType t = GetParam();
  const size_t esz = DataTypeSize(t), count = 777;
  std::vector<std::vector<char>> in(4, std::vector<char>(count * esz));
  std::vector<char> acc(count * AccumulatorElementSize(t)), wire(count * esz);
  for (int j = 0; j < 4; ++j) {
    for (size_t i = 0; i < count; ++i) Store(t, in[j].data(), i, Value(j, i, t));
    Accumulate(acc.data(), in[j].data(), count, t, j == 0);
  }
  AccumulatorToWire(wire.data(), acc.data(), count, t);
  for (size_t i = 0; i < count; ++i) {
    double exact = 0;
    for (int j = 0; j < 4; ++j) exact += Value(j, i, t);
    if (t == DataType::kUInt8) exact = static_cast<double>(static_cast<uint8_t>(static_cast<int>(exact)));
    ASSERT_NEAR(Load(t, wire.data(), i), exact, Tolerance(t, exact)) << DataTypeName(t) << " at " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryDtype, ReduceKernels,
                         ::testing::Values(DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                                           DataType::kBFloat16, DataType::kInt32, DataType::kInt64,
                                           DataType::kUInt8),
                         [](const ::testing::TestParamInfo<DataType>& info) {
                           return std::string(DataTypeName(info.param));
                         });

TEST(HalfConversions, RoundTripRepresentableValues) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 0.000061035156f}) EXPECT_EQ(HalfToFloat(FloatToHalf(f)), f);
  for (float f : {0.0f, 1.0f, -2.5f, 1.2676506e30f}) EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(f)), f);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(NAN))));
  EXPECT_TRUE(std::isinf(HalfToFloat(FloatToHalf(1e6f))));
}

}  // namespace
}  // namespace bps
