// The compressors (csrc/compression) against scalar references written here:
// onebit's scale and signs, topk's choice and ties, randomk's indices, the
// error-feedback identity across steps, the wire sizes, and the checks a
// server runs before decoding a peer's payload. Lengths hit the AVX2 body and
// the scalar tail. (tests/core/test_compression.py checks the same against
// NumPy, and through a job's servers.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "compression/codec.h"
#include "compression/compressor.h"
#include "compression/onebit_kernels.h"

namespace bps {
namespace {

std::vector<float> Gradient(size_t n, int seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = d(rng);
  return x;
}

CompressionSpec Spec(const std::string& text) {
  CompressionSpec spec;
  Status st = ParseCompressionSpec(text, &spec);
  EXPECT_TRUE(st.ok()) << st.message();
  return spec;
}

TEST(CompressionSpecTest, ParsesAndRefusesWithTheCause) {
  EXPECT_STREQ(Spec("onebit").codec->name(), "onebit");
  EXPECT_TRUE(Spec("onebit").error_feedback);
  EXPECT_FALSE(Spec("onebit:ef=0").error_feedback);
  CompressionSpec topk = Spec("topk:ratio=0.05");
  EXPECT_STREQ(topk.codec->name(), "topk");
  EXPECT_DOUBLE_EQ(topk.ratio, 0.05);
  CompressionSpec randomk = Spec("randomk:ratio=0.1,seed=7,ef=0");
  EXPECT_EQ(randomk.seed, 7u);
  EXPECT_FALSE(randomk.error_feedback);
  EXPECT_FALSE(Spec("").enabled());
  EXPECT_FALSE(Spec("none").enabled());
  CompressionSpec spec;
  Status st = ParseCompressionSpec("twobit", &spec);
  EXPECT_NE(st.message().find("unknown compressor 'twobit'"), std::string::npos) << st.message();
  st = ParseCompressionSpec("topk:ratio=0.9", &spec);
  EXPECT_NE(st.message().find("ratio must be in (0, 0.5]"), std::string::npos) << st.message();
  st = ParseCompressionSpec("onebit:ratio=0.1", &spec);
  EXPECT_NE(st.message().find("does not apply to onebit"), std::string::npos) << st.message();
  st = ParseCompressionSpec("topk:ratio=x", &spec);
  EXPECT_FALSE(st.ok());
  CompressionSpec momentum = Spec("onebit:momentum=0.9");
  EXPECT_DOUBLE_EQ(momentum.momentum, 0.9);
  EXPECT_TRUE(momentum.nesterov);
  EXPECT_EQ(DescribeSpec(momentum), "onebit:ef=1,momentum=0.9");
  EXPECT_FALSE(Spec("topk:ratio=0.01,momentum=0.5,nesterov=0").nesterov);
  EXPECT_EQ(Spec("onebit").momentum, 0.0);
  st = ParseCompressionSpec("onebit:momentum=1", &spec);
  EXPECT_NE(st.message().find("momentum must be in [0, 1)"), std::string::npos) << st.message();
  // Ranks that disagree on the worker momentum disagree on the codec header.
  CodecHeader with = MakeCodecHeader(momentum, 100), without = MakeCodecHeader(Spec("onebit"), 100);
  EXPECT_NE(memcmp(&with, &without, sizeof(with)), 0);
  EXPECT_EQ(DescribeCodec(with), "onebit with error feedback and nesterov momentum");
  CodecHeader server_ef = MakeCodecHeader(Spec("onebit:momentum=0.9,server_ef=1"), 100);
  EXPECT_TRUE(ServerErrorFeedback(server_ef));
  EXPECT_FALSE(ServerErrorFeedback(with));
  EXPECT_EQ(DescribeCodec(server_ef), "onebit with error feedback and nesterov momentum, server error feedback");
}

TEST(OneBitTest, ScaleIsMeanAbsAndSignsArePacked) {
  for (size_t n : {1u, 7u, 8u, 9u, 31u, 32u, 33u, 100u, 1027u}) {
    std::vector<float> x = Gradient(n, static_cast<int>(n));
    x[0] = -0.0f;  // negative zero counts as positive
    CodecHeader h = MakeCodecHeader(Spec("onebit:ef=0"), n);
    ASSERT_EQ(CompressedBytes(h), 16 + 4 + (n + 31) / 32 * 4);
    std::vector<char> wire(CompressedBytes(h));
    Compress(h, x.data(), nullptr, 1, 0, wire.data());
    double abs_sum = 0;
    for (float v : x) abs_sum += std::fabs(static_cast<double>(v));
    const float scale = static_cast<float>(abs_sum / n);
    std::vector<float> out(n);
    Decompress(wire.data(), 1, 0, out.data());
    for (size_t i = 0; i < n; ++i) {
      ASSERT_FLOAT_EQ(out[i], x[i] < 0 ? -scale : scale) << "n=" << n << " i=" << i;
    }
    EXPECT_EQ(ValidateCompressed(wire.data(), wire.size()), "");
  }
}

TEST(OneBitTest, KernelsMatchScalarLoops) {
  for (size_t n : {0u, 5u, 8u, 64u, 77u, 1000u}) {
    std::vector<float> x = Gradient(n, 3), acc = Gradient(n, 4);
    std::vector<uint8_t> bits((n + 7) / 8 + 1, 0);
    onebit::PackSigns(x.data(), n, bits.data());
    for (size_t i = 0; i < n; ++i) ASSERT_EQ((bits[i / 8] >> (i % 8)) & 1, x[i] < 0 ? 1 : 0);
    std::vector<float> expect = acc;
    for (size_t i = 0; i < n; ++i) expect[i] += x[i] < 0 ? -0.5f : 0.5f;
    onebit::AddSigned(acc.data(), bits.data(), n, 0.5f);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(acc[i], expect[i]);
    for (size_t i = 0; i < n; ++i) expect[i] -= x[i] < 0 ? -0.25f : 0.25f;
    onebit::SubtractSigned(acc.data(), bits.data(), n, 0.25f);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(acc[i], expect[i]);
  }
  std::cout << "onebit kernels: " << onebit::KernelName() << std::endl;
}

// residual' = (x + residual) - decompress(compress(x + residual)), every step.
void CheckErrorFeedback(const std::string& spec_text) {
  const size_t n = 1003;
  CodecHeader h = MakeCodecHeader(Spec(spec_text), n);
  std::vector<float> residual(n, 0.0f);
  std::vector<char> wire(CompressedBytes(h));
  for (uint32_t round = 0; round < 5; ++round) {
    std::vector<float> x = Gradient(n, 10 + round), corrected(n), sent(n);
    for (size_t i = 0; i < n; ++i) corrected[i] = x[i] + residual[i];
    Compress(h, x.data(), residual.data(), 42, round, wire.data());
    Decompress(wire.data(), 42, round, sent.data());
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(residual[i], corrected[i] - sent[i]) << spec_text << " round " << round;
  }
}

// With worker momentum: m = mu m + x, p = x + mu m (nesterov) or m, then
// error feedback on p; the state across steps against a scalar reference.
void CheckMomentum(const std::string& spec_text) {
  const size_t n = 1003;
  const CompressionSpec spec = Spec(spec_text);
  const float mu = static_cast<float>(spec.momentum);
  CodecHeader h = MakeCodecHeader(spec, n);
  std::vector<float> residual(n, 0.0f), momentum(n, 0.0f), ref_m(n, 0.0f), ref_e(n, 0.0f);
  std::vector<char> wire(CompressedBytes(h)), ref_wire(CompressedBytes(h));
  SliceState state;
  state.residual = spec.error_feedback ? residual.data() : nullptr;
  state.momentum = momentum.data();
  state.mu = mu;
  state.nesterov = spec.nesterov;
  for (uint32_t round = 0; round < 5; ++round) {
    std::vector<float> x = Gradient(n, 20 + round), c(n), sent(n);
    for (size_t i = 0; i < n; ++i) {
      ref_m[i] = mu * ref_m[i] + x[i];
      const float p = spec.nesterov ? x[i] + mu * ref_m[i] : ref_m[i];
      c[i] = spec.error_feedback ? ref_e[i] + p : p;
    }
    Compress(h, x.data(), state, 42, round, wire.data());
    Compress(h, c.data(), nullptr, 42, round, ref_wire.data());  // the compressor alone, on the reference's input
    ASSERT_EQ(wire, ref_wire) << spec_text << " round " << round;
    Decompress(wire.data(), 42, round, sent.data());
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(momentum[i], ref_m[i]) << spec_text << " round " << round;
      if (spec.error_feedback) {
        ref_e[i] = c[i] - sent[i];
        ASSERT_EQ(residual[i], ref_e[i]) << spec_text << " round " << round;
      }
    }
  }
}

TEST(WorkerMomentumTest, MomentumBeforeErrorFeedbackAcrossSteps) {
  CheckMomentum("onebit:momentum=0.9");
  CheckMomentum("onebit:momentum=0.9,nesterov=0");
  CheckMomentum("onebit:momentum=0.5,ef=0");
  CheckMomentum("topk:ratio=0.01,momentum=0.9");
  CheckMomentum("randomk:ratio=0.02,seed=3,momentum=0.7,nesterov=0");
}

TEST(ErrorFeedbackTest, ResidualIsWhatTheCompressorDropped) {
  CheckErrorFeedback("onebit");
  CheckErrorFeedback("topk:ratio=0.01");
  CheckErrorFeedback("randomk:ratio=0.02,seed=3");
}

TEST(TopKTest, LargestMagnitudesTiesToLowerIndex) {
  std::vector<float> x = {0.5f, -3.0f, 2.0f, -2.0f, 2.0f, 0.0f, 1.0f, -0.1f, 9.0f, 0.2f};
  CompressionSpec spec = Spec("topk:ratio=0.4,ef=0");  // k = 4
  CodecHeader h = MakeCodecHeader(spec, x.size());
  ASSERT_EQ(h.k, 4u);
  std::vector<char> wire(CompressedBytes(h));
  Compress(h, x.data(), nullptr, 0, 0, wire.data());
  std::vector<uint32_t> indices(4);
  memcpy(indices.data(), wire.data() + 16, 16);
  EXPECT_EQ(indices, (std::vector<uint32_t>{1, 2, 3, 8}));  // |2.0| at 2, 3, 4: the lower two
  std::vector<float> out(x.size());
  Decompress(wire.data(), 0, 0, out.data());
  EXPECT_EQ(out, (std::vector<float>{0, -3.0f, 2.0f, -2.0f, 0, 0, 0, 0, 9.0f, 0}));
}

// The definition, written the slow way: sort every index by (|x| larger,
// index lower) and keep the first k, ascending.
std::vector<uint32_t> TopKByFullSort(const std::vector<float>& x, uint32_t k) {
  std::vector<uint32_t> order(x.size());
  for (uint32_t i = 0; i < x.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return std::fabs(x[a]) > std::fabs(x[b]); });
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

std::vector<uint32_t> TopKOnTheWire(const std::vector<float>& x, double ratio) {
  CompressionSpec spec = Spec("topk:ratio=0.5,ef=0");
  spec.ratio = ratio;
  CodecHeader h = MakeCodecHeader(spec, x.size());
  std::vector<char> wire(CompressedBytes(h));
  Compress(h, x.data(), nullptr, 0, 0, wire.data());
  std::vector<uint32_t> indices(h.k);
  memcpy(indices.data(), wire.data() + sizeof(CodecHeader), h.k * sizeof(uint32_t));
  return indices;
}

TEST(TopKTest, TiesGoToTheLowerIndexWhereverTheThresholdFalls) {
  // Values from a handful of magnitudes (many ties at the threshold), with
  // +-0, equal magnitudes of both signs, subnormals and infinities; k cuts
  // through a run of ties in most cases.
  const float levels[] = {0.0f, -0.0f, 1e-40f, -1e-40f, 0.5f, -0.5f, 1.0f, -1.0f, 3.0f, 1e30f,
                          -std::numeric_limits<float>::infinity()};
  std::mt19937 rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t n = 1 + rng() % 3000;
    const int distinct = 1 + static_cast<int>(rng() % 11);
    std::vector<float> x(n);
    for (auto& v : x) v = levels[rng() % distinct];
    for (double ratio : {0.001, 0.01, 0.1, 0.37, 0.5}) {
      const uint32_t k = MakeCodecHeader(Spec("topk:ratio=" + std::to_string(ratio)), n).k;
      ASSERT_EQ(TopKOnTheWire(x, ratio), TopKByFullSort(x, k)) << "trial " << trial << " n=" << n << " k=" << k;
    }
  }
  // Every magnitude equal: the first k.
  std::vector<float> same(100, -2.0f);
  EXPECT_EQ(TopKOnTheWire(same, 0.05), (std::vector<uint32_t>{0, 1, 2, 3, 4}));
  // Gradient-like slices, as the engine sends them, in sizes past the
  // histograms' first pass.
  for (size_t n : {1u, 2u, 33u, 4097u, 100003u}) {
    std::vector<float> x = Gradient(n, static_cast<int>(n) + 17);
    const uint32_t k = MakeCodecHeader(Spec("topk:ratio=0.01"), n).k;
    ASSERT_EQ(TopKOnTheWire(x, 0.01), TopKByFullSort(x, k)) << "n=" << n;
  }
}

TEST(CodecRegistryTest, EveryCodecByNameAndWireId) {
  // The wire ids are part of the wire format: they never change.
  const std::pair<const char*, uint8_t> known[] = {{"onebit", 1}, {"topk", 2}, {"randomk", 3}};
  for (const auto& [name, id] : known) {
    const Codec* codec = FindCodec(name);
    ASSERT_NE(codec, nullptr) << name << " is not registered (was its file linked?)";
    EXPECT_EQ(codec->wire_id(), id) << name;
    EXPECT_EQ(FindCodec(id), codec) << name;
  }
  EXPECT_EQ(FindCodec("twobit"), nullptr);
  EXPECT_EQ(FindCodec(uint8_t{0}), nullptr);
  EXPECT_EQ(RegisteredCodecs().size(), 3u);
  CompressionSpec spec;
  EXPECT_NE(ParseCompressionSpec("twobit", &spec).message().find("expected onebit, topk or randomk"),
            std::string::npos);
  // An unknown wire id is refused before anything decodes it.
  CodecHeader h = MakeCodecHeader(Spec("onebit"), 8);
  std::vector<char> wire(CompressedBytes(h));
  h.kind = 200;
  memcpy(wire.data(), &h, sizeof(h));
  EXPECT_NE(ValidateCompressed(wire.data(), wire.size()).find("unknown compressor 200"), std::string::npos);
}

TEST(RandomKTest, DistinctSortedAndSharedByEveryone) {
  std::vector<uint32_t> a, b, c;
  RandomIndices(7, 99, 3, 1000, 50, &a);
  RandomIndices(7, 99, 3, 1000, 50, &b);
  RandomIndices(7, 99, 4, 1000, 50, &c);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(std::set<uint32_t>(a.begin(), a.end()).size(), 50u);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_LT(a.back(), 1000u);
  RandomIndices(1, 2, 0, 10, 10, &a);  // k = n: all of them
  EXPECT_EQ(a, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(CompressedPayloadTest, ServerRefusesMalformedPayloads) {
  CodecHeader h = MakeCodecHeader(Spec("topk:ratio=0.5"), 8);
  std::vector<float> x = Gradient(8, 1);
  std::vector<char> wire(CompressedBytes(h));
  Compress(h, x.data(), nullptr, 0, 0, wire.data());
  EXPECT_EQ(ValidateCompressed(wire.data(), wire.size()), "");
  EXPECT_NE(ValidateCompressed(wire.data(), wire.size() - 4), "");
  EXPECT_NE(ValidateCompressed(wire.data(), 8), "");
  const uint32_t far = 8;
  memcpy(wire.data() + 16, &far, 4);
  EXPECT_NE(ValidateCompressed(wire.data(), wire.size()).find("names element 8 of 8"), std::string::npos);
}

TEST(OneBitTest, OneScalePerDeclaredSegment) {
  // Parts of a fused tensor cut at offsets that are not multiples of 8, a
  // slice starting inside the second part; error feedback across two steps.
  CompressionSpec spec = Spec("onebit");
  spec.segment_ends = std::make_shared<const std::vector<uint64_t>>(std::vector<uint64_t>{5, 300, 301, 1100, 2000});
  const uint64_t offset = 40, n = 1500;
  std::vector<uint32_t> cuts = SliceCuts(spec, offset, n);
  EXPECT_EQ(cuts, (std::vector<uint32_t>{260, 261, 1060}));
  EXPECT_TRUE(SliceCuts(Spec("topk:ratio=0.1"), offset, n).empty());
  CodecHeader h = MakeCodecHeader(spec, n, cuts.size());
  EXPECT_EQ(CompressedBytes(h), sizeof(CodecHeader) + 3 * 4 + 4 * 4 + (n + 31) / 32 * 4);
  std::vector<float> residual(n, 0.0f), want_residual(n, 0.0f);
  SliceState state;
  state.residual = residual.data();
  state.cuts = cuts.data();
  std::vector<char> wire(CompressedBytes(h));
  for (int step = 0; step < 2; ++step) {
    std::vector<float> x = Gradient(n, 50 + step);
    for (uint64_t i = 0; i < n; ++i) x[i] *= i < 260 ? 1.0f : i < 261 ? 100.0f : i < 1060 ? 0.001f : 10.0f;
    Compress(h, x.data(), state, 9, step, wire.data());
    EXPECT_EQ(ValidateCompressed(wire.data(), wire.size()), "");
    std::vector<float> out(n), acc(n, 1.0f);
    Decompress(wire.data(), 9, step, out.data());
    DecompressAdd(wire.data(), 9, step, acc.data());
    const uint32_t bounds[] = {0, 260, 261, 1060, static_cast<uint32_t>(n)};
    for (int s = 0; s < 4; ++s) {
      double sum = 0;
      for (uint32_t i = bounds[s]; i < bounds[s + 1]; ++i) sum += std::fabs(static_cast<double>(x[i] + want_residual[i]));
      const float scale = static_cast<float>(sum / (bounds[s + 1] - bounds[s]));
      for (uint32_t i = bounds[s]; i < bounds[s + 1]; ++i) {
        const float c = x[i] + want_residual[i];
        const float sent = c < 0 ? -scale : scale;
        ASSERT_FLOAT_EQ(out[i], sent) << "step " << step << " element " << i;
        ASSERT_FLOAT_EQ(acc[i], 1.0f + sent) << i;
        want_residual[i] = c - sent;
        ASSERT_NEAR(residual[i], want_residual[i], 1e-6f * std::max(1.0f, std::fabs(c))) << i;
      }
    }
  }
  // A boundary out of order is refused before anything decodes it.
  uint32_t bad = 5;
  memcpy(wire.data() + sizeof(CodecHeader) + sizeof(uint32_t), &bad, sizeof(bad));
  EXPECT_NE(ValidateCompressed(wire.data(), wire.size()).find("not ascending"), std::string::npos);
}

TEST(TopKTest, TheServerAnswersTheExactSumUnlessAskedForTopK) {
  // Two machines' top-k pushes have at most 2k nonzeros between them: the
  // answer holds 2k entries (the sum, exactly); server_topk=1 keeps k.
  CodecHeader push = MakeCodecHeader(Spec("topk:ratio=0.01"), 1000);
  EXPECT_EQ(push.k, 10u);
  EXPECT_EQ(AnswerCodec(push, 2).k, 20u);
  EXPECT_EQ(AnswerCodec(push, 200).k, 1000u);  // never past the slice
  EXPECT_EQ(AnswerCodec(MakeCodecHeader(Spec("topk:ratio=0.01,server_topk=1"), 1000), 2).k, 10u);
  EXPECT_EQ(AnswerCodec(MakeCodecHeader(Spec("randomk:ratio=0.01"), 1000), 2).k, 10u);  // shared indices
  EXPECT_EQ(DescribeSpec(Spec("topk:ratio=0.01,server_topk=1")), "topk:ratio=0.01,ef=1,server_topk=1");
  CompressionSpec spec;
  EXPECT_NE(ParseCompressionSpec("onebit:server_topk=1", &spec).message().find("does not apply to onebit"),
            std::string::npos);
  std::vector<float> a = Gradient(1000, 1), b = Gradient(1000, 2), sum(1000, 0.0f);
  std::vector<char> wa(CompressedBytes(push)), wb(CompressedBytes(push));
  Compress(push, a.data(), nullptr, 1, 0, wa.data());
  Compress(push, b.data(), nullptr, 1, 0, wb.data());
  DecompressAdd(wa.data(), 1, 0, sum.data());
  DecompressAdd(wb.data(), 1, 0, sum.data());
  const CodecHeader answer = AnswerCodec(push, 2);
  std::vector<char> wire(CompressedBytes(answer));
  Compress(answer, sum.data(), nullptr, 1, 0, wire.data());
  std::vector<float> out(1000);
  Decompress(wire.data(), 1, 0, out.data());
  EXPECT_EQ(out, sum);
}

}  // namespace
}  // namespace bps
