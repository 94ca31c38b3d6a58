// Reduce kernels against a scalar reference, for every dtype, for sum and
// average, over sizes that hit the vector body and the scalar tail, at every
// instruction-set level this CPU runs; then each level against the baseline
// bit for bit (odd lengths, unaligned pointers, every 16-bit pattern).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>
#include <random>
#include <tuple>
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

// Runs a test at one level and restores the default afterwards.
class IsaScope {
 public:
  explicit IsaScope(ReduceIsa isa) : ok_(SetReduceIsaForTesting(isa)) {}
  ~IsaScope() { SetReduceIsaForTesting(DefaultReduceIsa()); }
  bool ok() const { return ok_; }

 private:
  bool ok_;
};

const ReduceIsa kAllIsas[] = {ReduceIsa::kBaseline, ReduceIsa::kAvx2, ReduceIsa::kAvx512};

class ReduceKernels : public ::testing::TestWithParam<std::tuple<DataType, ReduceIsa>> {
 protected:
  void SetUp() override {
    scope_.reset(new IsaScope(std::get<1>(GetParam())));
    if (!scope_->ok()) GTEST_SKIP() << "this CPU lacks " << ReduceIsaName(std::get<1>(GetParam()));
    ASSERT_EQ(ActiveReduceIsa(), std::get<1>(GetParam()));
  }
  void TearDown() override { scope_.reset(); }
  DataType dtype() const { return std::get<0>(GetParam()); }

 private:
  std::unique_ptr<IsaScope> scope_;
};

TEST_P(ReduceKernels, SumAndAverageMatchTheReference) {
  const DataType t = dtype();
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
  const DataType t = dtype();
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
  const DataType t = dtype();
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
  const DataType t = dtype();
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

const DataType kAllTypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16,
                              DataType::kInt32,   DataType::kInt64,   DataType::kUInt8};

INSTANTIATE_TEST_SUITE_P(EveryDtypeAndLevel, ReduceKernels,
                         ::testing::Combine(::testing::ValuesIn(kAllTypes), ::testing::ValuesIn(kAllIsas)),
                         [](const ::testing::TestParamInfo<std::tuple<DataType, ReduceIsa>>& info) {
                           return std::string(DataTypeName(std::get<0>(info.param))) + "_" +
                                  ReduceIsaName(std::get<1>(info.param));
                         });

// ---------------------------------------------------------------- levels agree

// Random bits, as the wire could carry them: for float types that includes
// NaN, infinities and subnormals, whose sums every level must round alike.
std::vector<char> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<char> v(n);
  for (auto& c : v) c = static_cast<char>(rng());
  return v;
}

// Everything the public API computes for these inputs, at the active level:
// sum, average (divisor 3), copy-scaled, server accumulate + wire.
std::vector<char> AllOutputs(DataType t, const std::vector<const char*>& in, size_t count) {
  const size_t esz = DataTypeSize(t);
  std::vector<const void*> ptrs(in.begin(), in.end());
  // Outputs start one element in: off every vector alignment, as inputs are.
  std::vector<char> sum((count + 1) * esz), avg((count + 1) * esz), scaled((count + 1) * esz);
  std::vector<char> acc((count + 1) * AccumulatorElementSize(t)), wire((count + 1) * esz);
  char* const sum_at = sum.data() + esz;
  char* const avg_at = avg.data() + esz;
  char* const scaled_at = scaled.data() + esz;
  char* const acc_at = acc.data() + AccumulatorElementSize(t);
  char* const wire_at = wire.data() + esz;
  ReduceInputs(ptrs.data(), static_cast<int>(ptrs.size()), count, t, sum_at, avg_at, 3);
  CopyScaled(scaled_at, in[0], count, t, 5);
  for (size_t j = 0; j < in.size(); ++j) Accumulate(acc_at, in[j], count, t, j == 0);
  AccumulatorToWire(wire_at, acc_at, count, t);
  std::vector<char> all;
  for (const char* v : {sum_at, avg_at, scaled_at, wire_at}) all.insert(all.end(), v, v + count * esz);
  if (!IsHalfType(t)) all.insert(all.end(), acc_at, acc_at + count * esz);
  return all;
}

TEST(ReduceLevels, EveryLevelMatchesTheBaselineBitForBit) {
  std::vector<ReduceIsa> levels;
  for (ReduceIsa isa : kAllIsas) {
    if (static_cast<int>(isa) <= static_cast<int>(BestSupportedReduceIsa())) levels.push_back(isa);
  }
  std::cout << "levels on this CPU:";
  for (ReduceIsa isa : levels) std::cout << " " << ReduceIsaName(isa);
  std::cout << std::endl;
  uint32_t seed = 1;
  for (DataType t : kAllTypes) {
    const size_t esz = DataTypeSize(t);
    // Around every vector width (16 to 64 bytes, x4 unrolled) and the 2048-element block.
    for (size_t count : {0, 1, 3, 7, 15, 17, 31, 33, 63, 65, 127, 129, 255, 257, 2047, 2049, 4099}) {
      for (int n : {1, 2, 3, 5}) {
        for (size_t offset : {0, 1, 3}) {  // elements: pointers off every vector alignment
          std::vector<std::vector<char>> storage;
          std::vector<const char*> in;
          for (int j = 0; j < n; ++j) {
            storage.push_back(RandomBytes((count + 4) * esz, seed++));
            in.push_back(storage.back().data() + offset * esz);
          }
          std::vector<char> want;
          {
            IsaScope scope(ReduceIsa::kBaseline);
            want = AllOutputs(t, in, count);
          }
          for (ReduceIsa isa : levels) {
            IsaScope scope(isa);
            const std::vector<char> got = AllOutputs(t, in, count);
            ASSERT_EQ(got.size(), want.size());
            for (size_t b = 0; b < got.size(); b += esz) {
              if (memcmp(got.data() + b, want.data() + b, esz) == 0) continue;
              const size_t part = b / (count * esz), i = (b % (count * esz)) / esz;
              // The float32 accumulator of 16-bit types is not compared; any
              // other float NaN may differ only in payload.
              const bool both_nan = IsFloat(t) && std::isnan(Load(t, got.data(), b / esz)) &&
                                    std::isnan(Load(t, want.data(), b / esz));
              ASSERT_TRUE(both_nan) << DataTypeName(t) << " at " << ReduceIsaName(isa) << ": output "
                                    << part << " (sum, average, scaled, wire, acc) differs at element " << i
                                    << " of " << count << ", " << n << " inputs, offset " << offset;
            }
          }
        }
      }
    }
  }
}

// Every float16 and bfloat16 bit pattern through the server path (widen,
// add, narrow), and random float32 patterns narrowed: identical bits at
// every level, NaN included (the narrowing writes one canonical NaN).
TEST(ReduceLevels, SixteenBitConversionsMatchTheBaselineExhaustively) {
  std::vector<uint16_t> every(65536);
  for (size_t i = 0; i < every.size(); ++i) every[i] = static_cast<uint16_t>(i);
  std::vector<float> wide(1 << 20);
  std::mt19937 rng(7);
  for (auto& f : wide) {
    const uint32_t u = rng();
    memcpy(&f, &u, 4);
  }
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
    auto run = [&](ReduceIsa isa, std::vector<uint16_t>* twice, std::vector<uint16_t>* narrowed) {
      IsaScope scope(isa);
      std::vector<float> acc(every.size());
      Accumulate(acc.data(), every.data(), every.size(), t, true);
      Accumulate(acc.data(), every.data(), every.size(), t, false);
      twice->resize(every.size());
      AccumulatorToWire(twice->data(), acc.data(), every.size(), t);
      narrowed->resize(wide.size());
      AccumulatorToWire(narrowed->data(), wide.data(), wide.size(), t);
    };
    std::vector<uint16_t> want_twice, want_narrowed;
    run(ReduceIsa::kBaseline, &want_twice, &want_narrowed);
    for (ReduceIsa isa : kAllIsas) {
      if (static_cast<int>(isa) > static_cast<int>(BestSupportedReduceIsa())) continue;
      std::vector<uint16_t> twice, narrowed;
      run(isa, &twice, &narrowed);
      for (size_t i = 0; i < twice.size(); ++i) {
        ASSERT_EQ(twice[i], want_twice[i]) << DataTypeName(t) << " " << ReduceIsaName(isa) << " x+x of 0x"
                                           << std::hex << i;
      }
      for (size_t i = 0; i < narrowed.size(); ++i) {
        uint32_t bits;
        memcpy(&bits, &wide[i], 4);
        ASSERT_EQ(narrowed[i], want_narrowed[i]) << DataTypeName(t) << " " << ReduceIsaName(isa)
                                                 << " narrowing float bits 0x" << std::hex << bits;
      }
    }
  }
}

TEST(ReduceLevels, TheDefaultLevelIsActiveAndUnsupportedOnesAreRefused) {
  EXPECT_EQ(ActiveReduceIsa(), DefaultReduceIsa());
  EXPECT_LE(static_cast<int>(DefaultReduceIsa()), static_cast<int>(BestSupportedReduceIsa()));
  if (BestSupportedReduceIsa() >= ReduceIsa::kAvx2) {
    EXPECT_EQ(DefaultReduceIsa(), ReduceIsa::kAvx2);
  }
  EXPECT_TRUE(SetReduceIsaForTesting(ReduceIsa::kBaseline));
  EXPECT_EQ(ActiveReduceIsa(), ReduceIsa::kBaseline);
  if (BestSupportedReduceIsa() != ReduceIsa::kAvx512) {
    EXPECT_FALSE(SetReduceIsaForTesting(ReduceIsa::kAvx512));
    EXPECT_EQ(ActiveReduceIsa(), ReduceIsa::kBaseline);
  }
  EXPECT_TRUE(SetReduceIsaForTesting(BestSupportedReduceIsa()));
  EXPECT_EQ(ActiveReduceIsa(), BestSupportedReduceIsa());
  EXPECT_TRUE(SetReduceIsaForTesting(DefaultReduceIsa()));
}

TEST(HalfConversions, RoundTripRepresentableValues) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 0.000061035156f}) EXPECT_EQ(HalfToFloat(FloatToHalf(f)), f);
  for (float f : {0.0f, 1.0f, -2.5f, 1.2676506e30f}) EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(f)), f);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(NAN))));
  EXPECT_TRUE(std::isinf(HalfToFloat(FloatToHalf(1e6f))));
}

}  // namespace
}  // namespace bps
