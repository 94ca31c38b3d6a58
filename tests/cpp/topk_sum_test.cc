// The servers' sparse topk sum (csrc/compression/topk_sum.h) writes the very
// payload the dense path writes (decode every push into a zeroed slice, then
// select the top machines x k of the sum), on pushes made by the real codec
// from random slices with overlapping picks, exact cancellations between
// machines, signed zeros, NaN, and slices smaller than machines x k.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "compression/compressor.h"
#include "compression/topk_sum.h"

namespace bps {
namespace {

CodecHeader TopKHeader(uint32_t count, double ratio) {
  CompressionSpec spec;
  EXPECT_TRUE(ParseCompressionSpec("topk:ratio=" + std::to_string(ratio) + ",ef=0", &spec).ok());
  return MakeCodecHeader(spec, count);
}

// The dense server path's answer payload.
std::vector<char> DenseAnswer(const std::vector<std::vector<char>>& pushes, const CodecHeader& push, uint32_t machines) {
  std::vector<float> acc(push.count);
  for (size_t m = 0; m < pushes.size(); ++m) {
    if (m == 0) {
      Decompress(pushes[m].data(), 7, 0, acc.data());
    } else {
      DecompressAdd(pushes[m].data(), 7, 0, acc.data());
    }
  }
  const CodecHeader answer = AnswerCodec(push, machines);
  std::vector<char> out(CompressedBytes(answer));
  Compress(answer, acc.data(), nullptr, 7, 0, out.data());
  return out;
}

std::vector<char> SparseAnswer(const std::vector<std::vector<char>>& pushes, const CodecHeader& push,
                               uint32_t machines) {
  SparseTopKSum sum;
  for (const auto& p : pushes) {
    EXPECT_TRUE(sum.Add(p.data() + sizeof(CodecHeader), push.k, push.count));
  }
  const CodecHeader answer = AnswerCodec(push, machines);
  std::vector<char> out(CompressedBytes(answer));
  memcpy(out.data(), &answer, sizeof(answer));
  sum.WriteAnswer(answer, out.data() + sizeof(answer));
  return out;
}

TEST(SparseTopKSum, WritesTheDensePathsAnswerByteForByte) {
  std::mt19937 rng(12345);
  int cases = 0;
  for (uint32_t count : {1u, 2u, 7u, 100u, 4099u}) {
    for (uint32_t machines : {1u, 2u, 3u, 4u}) {
      for (double ratio : {0.01, 0.2, 0.4, 0.5}) {
        for (int variant = 0; variant < 5; ++variant) {
          const CodecHeader h = TopKHeader(count, ratio);
          std::vector<std::vector<float>> inputs(machines, std::vector<float>(count));
          std::normal_distribution<float> normal(0.0f, 1.0f);
          for (auto& x : inputs) {
            for (auto& v : x) v = normal(rng);
          }
          if (machines > 1 && variant >= 1) {
            // Machine 1 cancels machine 0 exactly on some elements: both pick
            // them (the same magnitude), and their sum is a zero.
            for (uint32_t i = 0; i < count; i += 3) inputs[1][i] = -inputs[0][i];
          }
          if (variant >= 2) {
            for (uint32_t i = 1; i < count; i += 5) inputs[0][i] = -0.0f;  // signed zeros, chosen as fillers
            for (uint32_t i = 2; i < count; i += 5) inputs[0][i] = 0.0f;
          }
          if (variant == 3 && count > 4) inputs[machines - 1][count / 2] = std::numeric_limits<float>::quiet_NaN();
          if (variant == 4) {
            // A machine whose slice is all zeros (a sparse gradient): its
            // push is nothing but fillers, signed zeros among them.
            for (uint32_t i = 0; i < count; ++i) inputs[0][i] = (i % 2) ? -0.0f : 0.0f;
          }
          std::vector<std::vector<char>> pushes;
          for (auto& x : inputs) {
            pushes.emplace_back(CompressedBytes(h));
            Compress(h, x.data(), nullptr, 7, 0, pushes.back().data());
          }
          const std::vector<char> dense = DenseAnswer(pushes, h, machines);
          const std::vector<char> sparse = SparseAnswer(pushes, h, machines);
          ASSERT_EQ(dense.size(), sparse.size());
          ASSERT_EQ(0, memcmp(dense.data(), sparse.data(), dense.size()))
              << "count " << count << ", machines " << machines << ", ratio " << ratio << ", variant " << variant;
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 5 * 4 * 4 * 5);
}

TEST(SparseTopKSum, RefusesAPushWhoseIndicesAreNotAscendingOrInRange) {
  SparseTopKSum sum;
  auto body = [](std::vector<uint32_t> indices) {
    std::vector<char> b(indices.size() * 8);
    memcpy(b.data(), indices.data(), indices.size() * 4);
    return b;
  };
  EXPECT_TRUE(sum.Add(body({1, 4, 9}).data(), 3, 10));
  EXPECT_FALSE(sum.Add(body({4, 1, 9}).data(), 3, 10));  // unsorted
  EXPECT_FALSE(sum.Add(body({1, 1, 9}).data(), 3, 10));  // repeated
  EXPECT_FALSE(sum.Add(body({1, 4, 10}).data(), 3, 10));  // out of range
  EXPECT_EQ(sum.entries(), 3u);  // the refused pushes changed nothing
}

}  // namespace
}  // namespace bps
