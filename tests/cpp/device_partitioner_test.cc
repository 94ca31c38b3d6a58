// The device (NCCL) path's partition plan, core/partitioner.h's
// PlanEqualSlicePartitions: testable without a GPU, as the GPU path now
// takes its plan from core instead of its own copy.
#include <gtest/gtest.h>

#include "common/partitioner.h"

namespace bps {
namespace {

TEST(EqualSlicePartitions, CoverTheTensorWithEqualSlicesButTheLast) {
  for (int L : {1, 2, 3, 8}) {
    for (int64_t count : {int64_t(0), int64_t(1), int64_t(47), int64_t(4096), int64_t(1000003)}) {
      for (int64_t esz : {int64_t(2), int64_t(4), int64_t(8)}) {
        auto parts = PlanEqualSlicePartitions(count, esz, 64 * 1024, L);
        ASSERT_FALSE(parts.empty());
        int64_t next = 0;
        for (size_t i = 0; i < parts.size(); ++i) {
          EXPECT_EQ(parts[i].offset, next);
          next += parts[i].count;
          EXPECT_LE(parts[i].count * esz, std::max<int64_t>(64 * 1024, L * 16 * esz));
          if (i + 1 < parts.size()) {
            EXPECT_EQ(parts[i].count % (L * 16), 0) << "partition " << i << " of " << count << " x " << esz
                                                     << " B over " << L << " ranks splits unevenly";
          }
        }
        EXPECT_EQ(next, count);
      }
    }
  }
}

TEST(EqualSlicePartitions, ATinyPartitionBudgetStillMakesProgress) {
  auto parts = PlanEqualSlicePartitions(1000, 4, 1, 4);  // budget below one unit
  EXPECT_EQ(parts[0].count, 64);
  EXPECT_EQ(parts.size(), 16u);
}

}  // namespace
}  // namespace bps
