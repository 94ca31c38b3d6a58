// The scheduling order of active partitions.
#include <gtest/gtest.h>

#include <vector>

#include "core/partition_queue.h"

namespace bps {
namespace {

struct FakeTask {
  int id;
  bool done = false;
};

std::vector<int> Order(const PartitionQueue<FakeTask>& q) {
  std::vector<int> ids;
  for (auto& kv : q) ids.push_back(kv.second->id);
  return ids;
}

TEST(PartitionQueue, HighestPriorityThenSubmissionThenPartition) {
  std::vector<FakeTask> tasks{{0}, {1}, {2}, {3}, {4}, {5}};
  PartitionQueue<FakeTask> q;
  q.Insert({0, /*seq=*/1, /*index=*/1}, &tasks[0]);
  q.Insert({0, 1, 0}, &tasks[1]);
  q.Insert({5, 2, 0}, &tasks[2]);  // later, but higher priority
  q.Insert({-3, 0, 0}, &tasks[3]);  // earliest, lowest priority
  q.Insert({0, 0, 2}, &tasks[4]);
  q.Insert({5, 3, 0}, &tasks[5]);
  EXPECT_EQ(Order(q), (std::vector<int>{2, 5, 4, 1, 0, 3}));
}

TEST(PartitionQueue, EraseIfKeepsTheOrderOfTheRest) {
  std::vector<FakeTask> tasks;
  for (int i = 0; i < 100; ++i) tasks.push_back({i});
  PartitionQueue<FakeTask> q;
  for (int i = 99; i >= 0; --i) q.Insert({0, static_cast<uint64_t>(i), 0}, &tasks[i]);
  for (int i = 0; i < 100; i += 3) tasks[i].done = true;
  q.EraseIf([](FakeTask* t) { return t->done; });
  std::vector<int> want;
  for (int i = 0; i < 100; ++i) {
    if (i % 3) want.push_back(i);
  }
  EXPECT_EQ(Order(q), want);
  q.EraseIf([](FakeTask*) { return true; });
  EXPECT_TRUE(q.empty());
}

}  // namespace
}  // namespace bps
