// The agreement test of issue 39: the per-element code the CUDA kernels run
// (csrc/compression/*_element.h, compiled here for the host: BPS_HOST_DEVICE
// expands to nothing) composed as the kernels compose it (onebit.cu, topk.cu,
// randomk.cu, device_codec.cu: one word, one element or one draw per thread,
// histograms over the whole slice, prefix sums for output positions),
// against the host codecs (compressor.h) on the same input and state:
// onebit's sign bits, topk's and randomk's indices and values, and the
// error-feedback residuals exactly; onebit's scales to float32 rounding.
// tests/gpu/test_gpu_compression.py compares the kernels themselves on a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "compression/compressor.h"
#include "compression/error_feedback_element.h"
#include "compression/onebit_element.h"
#include "compression/randomk_element.h"
#include "compression/topk_element.h"

namespace bps {
namespace {

CompressionSpec Spec(const std::string& text) {
  CompressionSpec spec;
  EXPECT_TRUE(ParseCompressionSpec(text, &spec).ok()) << text;
  return spec;
}

std::vector<float> Gradient(size_t n, int seed, bool ties) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = ties ? std::round(d(rng) * 4.0f) / 4.0f : d(rng);
  return x;
}

std::vector<uint32_t> ExclusiveSum(const std::vector<uint32_t>& in) {
  std::vector<uint32_t> out(in.size());
  uint32_t sum = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    out[i] = sum;
    sum += in[i];
  }
  return out;
}

// ---- onebit, as onebit.cu runs it ----

struct OneBitPayload {
  std::vector<float> scales;
  std::vector<uint32_t> words;
};

// PackAndSumKernel as one warp that takes every word: lane j's bit j of the
// ballot, the lanes' running sums flushed when the segment changes, a word
// across a boundary added element by element. Then ScaleKernel.
OneBitPayload OneBitAsKernels(const std::vector<float>& c, const std::vector<uint32_t>& cuts) {
  const uint32_t n = static_cast<uint32_t>(c.size()), num_cuts = static_cast<uint32_t>(cuts.size());
  const uint32_t kNoSegment = 0xffffffffu;
  OneBitPayload p;
  std::vector<double> sums(num_cuts + 1, 0.0), run(32, 0.0);
  uint32_t run_segment = kNoSegment;
  auto flush = [&] {
    double total = 0;
    for (double& lane : run) total += lane;
    if (run_segment != kNoSegment) sums[run_segment] += total;
  };
  for (uint32_t w = 0; w < (n + 31) / 32; ++w) {
    const uint32_t first = w * 32, last = n - first < 32 ? n - 1 : first + 31;
    uint32_t word = 0;
    for (uint32_t lane = 0; lane < 32; ++lane) {
      const uint32_t i = first + lane;
      word |= static_cast<uint32_t>(i < n && element::OneBitNegative(c[i])) << lane;
    }
    p.words.push_back(word);
    const uint32_t segment = element::OneBitSegmentOf(cuts.data(), num_cuts, first);
    for (uint32_t lane = 0; lane < 32; ++lane) {
      const uint32_t i = first + lane;
      if (segment == element::OneBitSegmentOf(cuts.data(), num_cuts, last)) {
        if (lane == 0 && segment != run_segment) {
          flush();
          run_segment = segment;
          std::fill(run.begin(), run.end(), 0.0);
        }
        if (i < n) run[lane] += element::OneBitAbs(c[i]);
      } else if (i < n) {
        sums[element::OneBitSegmentOf(cuts.data(), num_cuts, i)] += element::OneBitAbs(c[i]);
      }
    }
  }
  flush();
  for (uint32_t s = 0; s <= num_cuts; ++s) {
    const uint32_t lo = element::OneBitSegmentBegin(cuts.data(), s);
    const uint32_t hi = element::OneBitSegmentEnd(cuts.data(), num_cuts, s, n);
    p.scales.push_back(element::OneBitScale(sums[s], hi - lo));
  }
  return p;
}

// Scales agree to float32 rounding: the double sums differ in order only.
void ExpectSameScale(float device, float host) {
  EXPECT_LE(std::fabs(device - host), std::fabs(host) * 2e-7f) << device << " vs " << host;
}

TEST(CompressionAgreementTest, OneBitSignsScalesAndResidual) {
  for (uint32_t n : {1u, 31u, 32u, 33u, 1000u, 4099u}) {
    for (bool segmented : {false, true}) {
      std::vector<uint32_t> cuts;
      if (segmented && n > 40) cuts = {5, 37, n / 2, n - 1};
      CodecHeader h = MakeCodecHeader(Spec("onebit"), n, cuts.size());
      std::vector<float> x = Gradient(n, static_cast<int>(n), false), residual = Gradient(n, 7, false);
      x[0] = -0.0f;
      std::vector<float> device_residual(n);
      for (uint32_t i = 0; i < n; ++i) device_residual[i] = element::Corrected(residual[i], x[i]);  // PrepareKernel
      SliceState state;
      state.residual = residual.data();
      state.cuts = cuts.data();
      std::vector<char> wire(CompressedBytes(h));
      Compress(h, x.data(), state, 1, 0, wire.data());

      const OneBitPayload device = OneBitAsKernels(device_residual, cuts);
      const char* body = wire.data() + sizeof(CodecHeader) + cuts.size() * sizeof(uint32_t);
      std::vector<float> host_scales(cuts.size() + 1);
      memcpy(host_scales.data(), body, host_scales.size() * sizeof(float));
      for (size_t s = 0; s < host_scales.size(); ++s) ExpectSameScale(device.scales[s], host_scales[s]);
      const char* signs = body + host_scales.size() * sizeof(float);
      ASSERT_EQ(0, memcmp(device.words.data(), signs, device.words.size() * sizeof(uint32_t))) << "n=" << n;
      ASSERT_EQ(wire.size(), static_cast<size_t>(signs - wire.data()) + device.words.size() * sizeof(uint32_t));
      // SignedKernel<kSubtractFromResidual>, with the host's scales (so the
      // residual matches exactly; with the device's own, to their rounding).
      const uint8_t* bits = reinterpret_cast<const uint8_t*>(signs);
      for (uint32_t i = 0; i < n; ++i) {
        const uint32_t s = element::OneBitSegmentOf(cuts.data(), static_cast<uint32_t>(cuts.size()), i);
        const float left = element::Leftover(device_residual[i], element::OneBitSigned(bits, i, host_scales[s]));
        ASSERT_EQ(left, residual[i]) << "n=" << n << " i=" << i;
      }
      // SignedKernel<kWrite> against Decompress.
      std::vector<float> host_out(n);
      Decompress(wire.data(), 1, 0, host_out.data());
      for (uint32_t i = 0; i < n; ++i) {
        const uint32_t s = element::OneBitSegmentOf(cuts.data(), static_cast<uint32_t>(cuts.size()), i);
        ASSERT_EQ(element::OneBitSigned(bits, i, host_scales[s]), host_out[i]) << i;
      }
    }
  }
}

// ---- topk, as topk.cu runs it ----

std::vector<uint32_t> TopKAsKernels(const std::vector<float>& c, uint32_t k) {
  const uint32_t n = static_cast<uint32_t>(c.size());
  uint32_t prefix = 0, wanted = k;  // StartKernel
  for (int pass = 0; pass < element::kTopKPasses; ++pass) {
    std::vector<uint32_t> histogram(element::kTopKMaxBins, 0);  // HistogramKernel over every element
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t key = element::TopKKey(c[i]);
      if (element::TopKMatchesPrefix(key, prefix, pass)) ++histogram[element::TopKDigit(key, pass)];
    }
    uint32_t bin = 0, above = 0;  // PickBinKernel
    element::TopKPickBin(histogram.data(), element::TopKDigitBins(pass), wanted, &bin, &above);
    wanted -= above;
    prefix |= bin << element::TopKDigitShift(pass);
  }
  std::vector<uint32_t> equal(n);  // EqualFlagsKernel, then the prefix sum
  for (uint32_t i = 0; i < n; ++i) equal[i] = element::TopKKey(c[i]) == prefix;
  std::vector<uint32_t> flags = ExclusiveSum(equal);
  for (uint32_t i = 0; i < n; ++i) flags[i] = element::TopKChosen(element::TopKKey(c[i]), prefix, flags[i], wanted);
  const std::vector<uint32_t> positions = ExclusiveSum(flags);
  std::vector<uint32_t> indices(k, 0xffffffffu);  // WriteChosenKernel
  for (uint32_t i = 0; i < n; ++i) {
    if (flags[i]) indices.at(positions[i]) = i;
  }
  return indices;
}

TEST(CompressionAgreementTest, TopKIndicesValuesAndResidualWithTies) {
  for (uint32_t n : {1u, 2u, 10u, 1000u, 5000u}) {
    for (bool ties : {false, true}) {
      for (const char* ratio : {"0.001", "0.01", "0.5"}) {
        CodecHeader h = MakeCodecHeader(Spec(std::string("topk:ratio=") + ratio), n);
        std::vector<float> x = Gradient(n, static_cast<int>(n) + 1, ties), residual(n, 0.0f);
        if (n > 2) x[1] = -0.0f;
        std::vector<char> wire(CompressedBytes(h));
        Compress(h, x.data(), residual.data(), 0, 0, wire.data());
        std::vector<float> c(n);
        for (uint32_t i = 0; i < n; ++i) c[i] = element::Corrected(0.0f, x[i]);
        const std::vector<uint32_t> indices = TopKAsKernels(c, h.k);
        ASSERT_EQ(0, memcmp(indices.data(), wire.data() + sizeof(CodecHeader), h.k * sizeof(uint32_t)))
            << "n=" << n << " ratio " << ratio << (ties ? " with ties" : "");
        std::vector<float> values(h.k);
        for (uint32_t j = 0; j < h.k; ++j) values[j] = c[indices[j]];
        ASSERT_EQ(0, memcmp(values.data(), wire.data() + sizeof(CodecHeader) + h.k * sizeof(uint32_t),
                            h.k * sizeof(float)));
        for (uint32_t j : indices) c[j] = 0.0f;  // ClearSentKernel
        ASSERT_EQ(c, residual);
      }
    }
  }
}

// ---- randomk, as randomk.cu runs it ----

std::vector<uint32_t> RandomKAsKernels(uint32_t seed, uint64_t key, uint32_t round, uint32_t n, uint32_t k) {
  const uint64_t start = element::RandomKStreamStart(seed, key, round);
  std::vector<uint32_t> first(n, element::kNoDraw);  // FirstDrawKernel (atomicMin)
  for (uint32_t j = n - k; j < n; ++j) {
    uint32_t& slot = first[element::RandomKDraw(start, n, k, j)];
    slot = std::min(slot, j);
  }
  std::vector<uint32_t> flags(n);  // ChosenFlagsKernel
  for (uint32_t v = 0; v < n; ++v) flags[v] = element::RandomKChosen(start, n, k, first.data(), v);
  const std::vector<uint32_t> positions = ExclusiveSum(flags);
  std::vector<uint32_t> indices(k, 0xffffffffu);
  for (uint32_t v = 0; v < n; ++v) {
    if (flags[v]) indices.at(positions[v]) = v;
  }
  return indices;
}

TEST(CompressionAgreementTest, RandomKIndicesAreFloydsForEveryShape) {
  // Small n with k near n makes long collision chains; k = n takes all.
  int checked = 0;
  for (uint32_t n : {1u, 2u, 3u, 7u, 64u, 100u, 1000u, 65537u}) {
    for (uint32_t k : {1u, 2u, n / 3, n / 2, n - 1, n}) {
      if (k == 0 || k > n) continue;
      for (uint32_t round = 0; round < 4; ++round) {
        std::vector<uint32_t> host;
        RandomIndices(7, 1234 + n, round, n, k, &host);
        ASSERT_EQ(RandomKAsKernels(7, 1234 + n, round, n, k), host) << "n=" << n << " k=" << k << " round " << round;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 150);
}

TEST(CompressionAgreementTest, RandomKPayloadAndResidual) {
  const uint32_t n = 3001;
  CodecHeader h = MakeCodecHeader(Spec("randomk:ratio=0.05,seed=11"), n);
  std::vector<float> x = Gradient(n, 5, false), residual(n, 0.0f);
  std::vector<char> wire(CompressedBytes(h));
  Compress(h, x.data(), residual.data(), 77, 3, wire.data());
  const std::vector<uint32_t> indices = RandomKAsKernels(11, 77, 3, n, h.k);
  std::vector<float> values(h.k), c = x;
  for (uint32_t j = 0; j < h.k; ++j) values[j] = c[indices[j]];  // GatherKernel
  ASSERT_EQ(0, memcmp(values.data(), wire.data() + sizeof(CodecHeader), h.k * sizeof(float)));
  for (uint32_t j : indices) c[j] = 0.0f;  // ClearSentKernel
  ASSERT_EQ(c, residual);
}

// ---- momentum and error feedback, as PrepareKernel runs them ----

TEST(CompressionAgreementTest, MomentumAndErrorFeedbackInput) {
  for (const char* text : {"onebit:momentum=0.9", "topk:ratio=0.01,momentum=0.9,nesterov=0",
                           "randomk:ratio=0.02,momentum=0.7,ef=0"}) {
    const CompressionSpec spec = Spec(text);
    const uint32_t n = 1003;
    const float mu = static_cast<float>(spec.momentum);
    CodecHeader h = MakeCodecHeader(spec, n);
    std::vector<float> momentum(n, 0.0f), residual(n, 0.0f), device_m(n, 0.0f), device_e(n, 0.0f);
    SliceState state;
    state.momentum = momentum.data();
    state.residual = spec.error_feedback ? residual.data() : nullptr;
    state.mu = mu;
    state.nesterov = spec.nesterov;
    std::vector<char> wire(CompressedBytes(h)), device_wire(CompressedBytes(h));
    for (uint32_t round = 0; round < 4; ++round) {
      std::vector<float> x = Gradient(n, 30 + round, false), c(n);
      for (uint32_t i = 0; i < n; ++i) {
        device_m[i] = element::MomentumUpdate(device_m[i], x[i], mu);
        const float p = element::MomentumStepped(x[i], device_m[i], mu, spec.nesterov);
        c[i] = spec.error_feedback ? (device_e[i] = element::Corrected(device_e[i], p)) : p;
      }
      Compress(h, x.data(), state, 5, round, wire.data());
      ASSERT_EQ(device_m, momentum) << text << " round " << round;
      Compress(h, c.data(), nullptr, 5, round, device_wire.data());  // the codec alone, on the device's input
      if (spec.error_feedback) {
        std::vector<float> sent(n);
        Decompress(wire.data(), 5, round, sent.data());
        for (uint32_t i = 0; i < n; ++i) device_e[i] = element::Leftover(c[i], sent[i]);
        ASSERT_EQ(device_e, residual) << text << " round " << round;
      }
      ASSERT_EQ(device_wire, wire) << text << " round " << round;
    }
  }
}

}  // namespace
}  // namespace bps
