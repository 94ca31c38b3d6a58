// The partition plan is the contract every rank of every machine derives on
// its own: these properties must hold for any size, local size and servers.
#include <gtest/gtest.h>

#include <map>

#include "common/partitioner.h"

namespace bps {
namespace {

void ExpectCovers(const std::vector<Range>& parts, int64_t count) {
  int64_t next = 0;
  for (const Range& r : parts) {
    EXPECT_EQ(r.offset, next);
    EXPECT_GT(r.count, 0);
    next += r.count;
  }
  EXPECT_EQ(next, count);
}

TEST(PlanPartitions, SmallTensorIsOnePartition) {
  auto parts = PlanPartitions(10, 4, 4096000, 1, 1);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].offset, 0);
  EXPECT_EQ(parts[0].count, 10);
}

TEST(PlanPartitions, EmptyTensorHasOneEmptyPartition) {
  auto parts = PlanPartitions(0, 4, 4096, 2, 3);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].count, 0);
}

TEST(PlanPartitions, CoversEveryElementOnceWithinTheByteLimit) {
  for (int64_t count : {1, 15, 16, 17, 1000, 4096, 100003, 1 << 20}) {
    for (int64_t esz : {1, 2, 4, 8}) {
      for (int servers : {0, 1, 2, 3, 4, 7}) {
        for (int local : {1, 2, 3, 8}) {
          const int64_t limit = 4096;
          auto parts = PlanPartitions(count, esz, limit, local, servers);
          ExpectCovers(parts, count);
          for (size_t i = 0; i + 1 < parts.size(); ++i) {
            EXPECT_EQ(parts[i].offset % 16, 0) << "boundaries stay 16-element aligned";
          }
          (void)limit;
        }
      }
    }
  }
}

TEST(PlanPartitions, PartitionsRespectTheByteLimitUpToAlignment) {
  auto parts = PlanPartitions(1 << 20, 4, 1 << 16, 1, 1);
  for (const Range& r : parts) EXPECT_LE(r.count * 4, (1 << 16) + 16 * 4);
  EXPECT_GE(parts.size(), 16u);
}

TEST(PlanPartitions, ServersGetEqualBytes) {
  // 4 servers, 1 local rank: the partition count is a multiple of 4, so the
  // round robin gives each server the same number of (equal) partitions.
  const int servers = 4;
  auto parts = PlanPartitions(1000000, 4, 100000, 1, servers);
  std::map<int, int64_t> bytes;
  for (size_t i = 0; i < parts.size(); ++i) {
    bytes[ServerFor(12345, static_cast<uint32_t>(i), 0, 1, servers)] += parts[i].count;
  }
  ASSERT_EQ(bytes.size(), static_cast<size_t>(servers));
  int64_t lo = bytes.begin()->second, hi = lo;
  for (auto& kv : bytes) {
    lo = std::min(lo, kv.second);
    hi = std::max(hi, kv.second);
  }
  // Only the 16-element rounding of each partition, gathered in the last one, may differ.
  EXPECT_LE(hi - lo, static_cast<int64_t>(16 * parts.size()));
  EXPECT_LT(hi - lo, hi / 10);
}

TEST(SliceOf, SlicesTileThePartition) {
  for (int64_t n : {0, 1, 16, 17, 100, 4099}) {
    for (int L : {1, 2, 3, 4, 16}) {
      int64_t next = 0;
      for (int q = 0; q < L; ++q) {
        Range s = SliceOf(n, L, q);
        EXPECT_EQ(s.offset, std::min(next, n));
        EXPECT_GE(s.count, 0);
        next = s.offset + s.count;
        EXPECT_EQ(s.offset % 16 == 0 || s.offset == n, true) << "slices start vector-aligned";
      }
      EXPECT_EQ(next, n) << "n=" << n << " L=" << L;
    }
  }
}

TEST(ServerFor, RoundRobinFromANameDerivedStart) {
  const int servers = 3;
  const uint64_t h = 7;
  std::vector<int> seen;
  for (uint32_t p = 0; p < 6; ++p) seen.push_back(ServerFor(h, p, 0, 1, servers));
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 0, 1, 2, 0}));
  // Slices of one partition on a machine with 2 local ranks go to different servers.
  EXPECT_NE(ServerFor(h, 0, 0, 2, servers), ServerFor(h, 0, 1, 2, servers));
}

}  // namespace
}  // namespace bps
