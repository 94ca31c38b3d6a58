// Byte-counted scheduling credits (core/credit_window.h).
#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "core/credit_window.h"

namespace bps {
namespace {

TEST(CreditWindow, SmallPartitionsPassBesideALargeOneUpToTheBudget) {
  CreditWindow w(100);
  w.BeginPass();
  ASSERT_TRUE(w.TryAdmit(60));  // the large one
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(w.TryAdmit(10)) << "small partition " << i;
  EXPECT_EQ(w.in_flight(), 100u);
  EXPECT_FALSE(w.TryAdmit(10));  // the budget is full
  w.Release(60);
  w.BeginPass();
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(w.TryAdmit(10)) << "after the large one left, " << i;
  EXPECT_FALSE(w.TryAdmit(1));
}

TEST(CreditWindow, PartitionLargerThanTheWindowGoesAloneOnceItDrains) {
  CreditWindow w(100);
  w.BeginPass();
  ASSERT_TRUE(w.TryAdmit(30));
  EXPECT_FALSE(w.TryAdmit(500));  // too large while anything is in flight
  // Refused partitions hold back the rest of the pass, though 10 would fit:
  // otherwise a stream of small ones keeps the window from ever emptying.
  EXPECT_FALSE(w.TryAdmit(10));
  w.Release(30);
  w.BeginPass();
  ASSERT_TRUE(w.TryAdmit(500));  // empty window: admitted alone
  EXPECT_FALSE(w.TryAdmit(10));
  w.Release(500);
  w.BeginPass();
  EXPECT_TRUE(w.TryAdmit(10));
}

// A release wakes the engine only when a partition waits for the credit:
// one was refused on that lane since the lane's last admission.
TEST(CreditWindow, AReleaseSaysWhetherAPartitionWaitsForIt) {
  CreditWindow w(100, 2);
  w.BeginPass();
  ASSERT_TRUE(w.TryAdmit(0, 60));
  ASSERT_TRUE(w.TryAdmit(1, 60));
  EXPECT_FALSE(w.Release(0, 30));  // nobody was refused: no wakeup
  EXPECT_FALSE(w.TryAdmit(1, 60));  // lane 1 refuses
  EXPECT_TRUE(w.Release(1, 10));    // so its release must wake the engine
  EXPECT_FALSE(w.Release(0, 10));   // lane 0 still has nobody waiting
  w.BeginPass();
  EXPECT_TRUE(w.TryAdmit(1, 50));   // admitted: lane 1 waits no more
  EXPECT_FALSE(w.Release(1, 10));
  CreditWindow unlimited(0);
  unlimited.BeginPass();
  ASSERT_TRUE(unlimited.TryAdmit(1000));
  EXPECT_FALSE(unlimited.Release(1000));
}

// Each server its own window: a partition refused for one server holds back
// later ones for that server only, and the other server's pushes still go.
TEST(CreditWindow, AFullLaneDoesNotHoldBackAnotherLane) {
  CreditWindow w(100, 2);
  w.BeginPass();
  ASSERT_TRUE(w.TryAdmit(0, 100));
  EXPECT_FALSE(w.TryAdmit(0, 10));  // lane 0 is full
  EXPECT_TRUE(w.TryAdmit(1, 60));   // lane 1 is not
  EXPECT_FALSE(w.TryAdmit(1, 60));  // until its own budget
  EXPECT_FALSE(w.TryAdmit(1, 10));  // and then, in this pass, nothing smaller behind it
  EXPECT_FALSE(w.TryAdmit(0, 1));   // lane 0 stays refused in this pass
  EXPECT_EQ(w.in_flight(), 160u);
  EXPECT_EQ(w.in_flight(0), 100u);
  w.Release(0, 100);
  w.BeginPass();
  EXPECT_TRUE(w.TryAdmit(0, 10));
  EXPECT_FALSE(w.TryAdmit(1, 60));
  EXPECT_GT(w.stalled_ns(), 0u);
}

TEST(CreditWindow, ZeroBudgetIsUnlimited) {
  CreditWindow w(0);
  w.BeginPass();
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(w.TryAdmit(1 << 20));
}

// A scheduler-like loop: a large partition at the head of the order and an
// endless supply of small ones behind it, with transport threads releasing
// sent bytes concurrently. The large one must be admitted, and the bytes in
// flight must never exceed the budget except for a lone oversized partition.
TEST(CreditWindow, LargePartitionIsNotStarvedByConcurrentSmallTraffic) {
  constexpr uint64_t kBudget = 1000, kSmall = 100, kLarge = 5000;
  CreditWindow w(kBudget);
  std::mutex mu;
  std::deque<uint64_t> sent;  // admitted, not yet released
  std::atomic<bool> stop{false};
  std::atomic<bool> over_budget{false};
  std::vector<std::thread> senders;
  for (int i = 0; i < 2; ++i) {
    senders.emplace_back([&] {
      while (!stop.load()) {
        uint64_t bytes = 0;
        {
          std::lock_guard<std::mutex> lock(mu);
          if (!sent.empty()) {
            bytes = sent.front();
            sent.pop_front();
          }
        }
        if (bytes) {
          w.Release(bytes);
        } else {
          std::this_thread::yield();
        }
      }
    });
  }
  // Warm up: fill the window with small partitions so the large one meets a
  // busy window.
  w.BeginPass();
  while (w.TryAdmit(kSmall)) {
    std::lock_guard<std::mutex> lock(mu);
    sent.push_back(kSmall);
  }
  bool large_admitted = false;
  uint64_t passes = 0;
  for (; passes < 10000000 && !large_admitted; ++passes) {
    w.BeginPass();
    if (w.TryAdmit(kLarge)) {
      large_admitted = true;
      if (w.in_flight() > kLarge) over_budget = true;  // must have gone alone
      std::lock_guard<std::mutex> lock(mu);
      sent.push_back(kLarge);
    }
    // The small ones behind it in scheduling order.
    for (int i = 0; i < 8; ++i) {
      if (!w.TryAdmit(kSmall)) break;
      if (w.in_flight() > kBudget) over_budget = true;
      std::lock_guard<std::mutex> lock(mu);
      sent.push_back(kSmall);
    }
  }
  stop = true;
  for (auto& t : senders) t.join();
  EXPECT_TRUE(large_admitted) << "starved for " << passes << " passes";
  EXPECT_FALSE(over_budget.load());
  uint64_t left = 0;
  for (uint64_t b : sent) left += b;
  EXPECT_EQ(w.in_flight(), left);
}

}  // namespace
}  // namespace bps
