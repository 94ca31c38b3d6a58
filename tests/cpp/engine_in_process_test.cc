// Whole jobs in one process (tests/cpp/in_process_job.h): N workers x S
// servers as Engine objects built from a Config, over loopback TCP and real
// shared memory. Exact sums for several layouts, and what the other ranks
// see when one rank's engine goes away in the middle of a round.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "in_process_job.h"
#include "test_matrix.h"

namespace bps {
namespace {

using testing_support::Completion;
using testing_support::InProcessJob;
using testing_support::JobShape;

class EngineInProcess : public ::testing::TestWithParam<JobShape> {};

struct TensorCase {
  std::string name;
  int64_t count;
  DataType dtype;
  ReduceOp reduce_op;
};

// Rank r contributes (r + 1) * (i % 7 + 1) at element i: every partial sum is
// an exact integer, so results compare exactly.
template <typename T>
std::vector<T> Contribution(int rank, int64_t count, int round) {
  std::vector<T> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[i] = static_cast<T>((rank + 1) * (i % 7 + 1) + round);
  return v;
}

template <typename T>
T Expected(int world, int64_t i, int round, bool average) {
  double sum = 0;
  for (int r = 0; r < world; ++r) sum += (r + 1) * (i % 7 + 1) + round;
  return static_cast<T>(average ? sum / world : sum);
}

TEST_P(EngineInProcess, EveryRankGetsTheExactSum) {
  const JobShape shape = GetParam();
  InProcessJob job(shape);
  Status st = job.Start();
  ASSERT_TRUE(st.ok()) << st.message();
  const int world = job.size();
  for (int r = 0; r < world; ++r) {  // machines of different sizes too: global ranks in machine order
    ASSERT_EQ(job.rank(r).rank(), r);
    ASSERT_EQ(job.rank(r).size(), world);
  }
  const std::vector<TensorCase> tensors = {
      {"scalar", 1, DataType::kFloat32, ReduceOp::kSum},
      {"weights", 5000, DataType::kFloat32, ReduceOp::kSum},   // ~5 partitions of 4 KB
      {"averaged", 3001, DataType::kFloat32, ReduceOp::kAverage},
      {"counts", 2048, DataType::kInt32, ReduceOp::kSum},
  };
  constexpr int kRounds = 3;
  // Per rank, per round, per tensor: input, output, completion.
  struct Slot {
    std::vector<float> fin, fout;
    std::vector<int32_t> iin, iout;
    Completion done;
  };
  std::vector<std::vector<std::vector<std::unique_ptr<Slot>>>> slots(world);
  for (int r = 0; r < world; ++r) {
    slots[r].resize(kRounds);
    for (int round = 0; round < kRounds; ++round) {
      // Ranks submit in different orders: keys, not order, match them up.
      std::vector<size_t> order(tensors.size());
      std::iota(order.begin(), order.end(), 0);
      std::rotate(order.begin(), order.begin() + (r + round) % order.size(), order.end());
      slots[r][round].resize(tensors.size());
      for (size_t k : order) {
        const TensorCase& tc = tensors[k];
        auto slot = std::make_unique<Slot>();
        TensorView t{};
        t.dtype = static_cast<int32_t>(tc.dtype);
        t.num_elements = tc.count;
        t.device = -1;
        void* out = nullptr;
        if (tc.dtype == DataType::kFloat32) {
          slot->fin = Contribution<float>(r, tc.count, round);
          slot->fout.assign(tc.count, -1);
          t.data = slot->fin.data();
          out = slot->fout.data();
        } else {
          slot->iin = Contribution<int32_t>(r, tc.count, round);
          slot->iout.assign(tc.count, -1);
          t.data = slot->iin.data();
          out = slot->iout.data();
        }
        st = job.rank(r).Submit(t, out, tc.name, 0, tc.reduce_op, Completion::Callback, &slot->done);
        ASSERT_TRUE(st.ok()) << st.message();
        slots[r][round][k] = std::move(slot);
      }
    }
  }
  for (int r = 0; r < world; ++r) {
    for (int round = 0; round < kRounds; ++round) {
      for (size_t k = 0; k < tensors.size(); ++k) {
        const TensorCase& tc = tensors[k];
        Slot& slot = *slots[r][round][k];
        ASSERT_TRUE(slot.done.Wait(30)) << "rank " << r << " '" << tc.name << "' round " << round << " never completed";
        ASSERT_EQ(slot.done.code, StatusCode::kOk) << slot.done.message;
        const bool average = tc.reduce_op == ReduceOp::kAverage;
        int64_t wrong = 0, first = -1;
        for (int64_t i = 0; i < tc.count; ++i) {
          bool ok = tc.dtype == DataType::kFloat32 ? slot.fout[i] == Expected<float>(world, i, round, average)
                                            : slot.iout[i] == Expected<int32_t>(world, i, round, average);
          if (!ok && wrong++ == 0) first = i;
        }
        EXPECT_EQ(wrong, 0) << "rank " << r << " '" << tc.name << "' round " << round << ": " << wrong
                            << " wrong elements, first at " << first;
      }
    }
  }
  job.Stop();
}

// Every layout over every transport and reducer (test_matrix.h).
INSTANTIATE_TEST_SUITE_P(Layouts, EngineInProcess,
                         ::testing::ValuesIn(testing_support::OverEveryTransportAndReducer(std::vector<JobShape>{
                             JobShape{1, 2, 0},  // one machine: shared memory only
                             JobShape{2, 1, 1},  // two machines, one server
                             JobShape{3, 1, 2},  // three machines, two servers
                             JobShape{2, 2, 2},  // shared memory and servers
                             // machines of different sizes (issue 29)
                             JobShape{0, 0, 1, 4096, 20, 8192, {2, 1}},
                             JobShape{0, 0, 2, 4096, 20, 8192, {3, 1}},
                             JobShape{0, 0, 2, 4096, 20, 8192, {1, 2, 3}}})),
                         testing_support::MatrixCaseName);

// Runs one push_pull of `name` on every rank in `ranks` and waits for it.
void PushPullOnRanks(InProcessJob& job, const std::vector<int>& ranks, const std::string& name) {
  std::vector<std::vector<float>> in(ranks.size(), std::vector<float>(100, 1.0f)), out(ranks.size());
  std::vector<Completion> done(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i) {
    out[i].resize(100);
    TensorView t{};
    t.data = in[i].data();
    t.dtype = static_cast<int32_t>(DataType::kFloat32);
    t.num_elements = 100;
    t.device = -1;
    ASSERT_TRUE(job.rank(ranks[i]).Submit(t, out[i].data(), name, 0, ReduceOp::kSum, Completion::Callback, &done[i]).ok());
  }
  for (size_t i = 0; i < ranks.size(); ++i) {
    ASSERT_TRUE(done[i].Wait(20));
    ASSERT_EQ(done[i].code, StatusCode::kOk) << done[i].message;
  }
}

struct PendingOp {
  std::vector<float> in = std::vector<float>(1000, 1.0f), out = std::vector<float>(1000);
  Completion done;
  Status Submit(Engine& engine, const std::string& name) {
    TensorView t{};
    t.data = in.data();
    t.dtype = static_cast<int32_t>(DataType::kFloat32);
    t.num_elements = static_cast<int64_t>(in.size());
    t.device = -1;
    return engine.Submit(t, out.data(), name, 0, ReduceOp::kSum, Completion::Callback, &done);
  }
};

// A rank that fails tells its servers why, and they tell every other worker:
// the pending op fails with the root cause well before BYTEPS_TIMEOUT.
// Scheduling credits come back when a server has a push, not with its
// answer (issue 38): with one partition of credit, machine 0 submits 'a' then
// 'b' and machine 1 'b' then 'a', at the priorities that make each push its
// own first tensor first. Credits held to the answer deadlocked here (each
// window held a partition the other machine could not push); both tensors
// must complete with the exact sums.
TEST(EngineInProcessCredits, MachinesPushingInDifferentOrdersNeverWaitForEachOthersCredits) {
  JobShape shape;
  shape.machines = 2;
  shape.servers = 1;
  shape.partition_bytes = 4096;
  shape.scheduling_credit = 1;
  InProcessJob job(shape);
  Status st = job.Start();
  ASSERT_TRUE(st.ok()) << st.message();
  constexpr int64_t kCount = 8 * 1024;  // 8 partitions of 4 KB each
  const char* names[2] = {"a", "b"};
  std::vector<float> in[2][2], out[2][2];
  Completion done[2][2];
  for (int r = 0; r < 2; ++r) {
    for (int k = 0; k < 2; ++k) {
      const int tensor = r == 0 ? k : 1 - k;  // machine 1 in the other order
      in[r][tensor] = Contribution<float>(r, kCount, tensor);
      out[r][tensor].assign(kCount, -1);
      TensorView t{};
      t.dtype = static_cast<int32_t>(DataType::kFloat32);
      t.num_elements = kCount;
      t.device = -1;
      t.data = in[r][tensor].data();
      // The later submission gets the higher priority on each machine.
      st = job.rank(r).Submit(t, out[r][tensor].data(), names[tensor], /*priority=*/k, ReduceOp::kSum,
                              Completion::Callback, &done[r][tensor]);
      ASSERT_TRUE(st.ok()) << st.message();
    }
  }
  for (int r = 0; r < 2; ++r) {
    for (int tensor = 0; tensor < 2; ++tensor) {
      ASSERT_TRUE(done[r][tensor].Wait(30)) << "rank " << r << " '" << names[tensor] << "' never completed";
      ASSERT_EQ(done[r][tensor].code, StatusCode::kOk) << done[r][tensor].message;
      for (int64_t i = 0; i < kCount; ++i) {
        ASSERT_EQ(out[r][tensor][i], (Expected<float>(2, i, tensor, false))) << "element " << i;
      }
    }
  }
  job.Stop();
}

// A partition of several pushes (machines of different sizes: the machine of
// one rank pushes every network slice) whose lane refuses its second push
// waits for a receipt like any refused partition: the engine sleeps instead
// of running pass after pass with nothing to do. It once reported such a
// call as progress and spun until the lane drained (issue 38).
TEST(EngineInProcessCredits, APartlySentPartitionRefusedCreditLetsTheEngineSleep) {
  JobShape shape;
  shape.local_sizes = {2, 1};
  shape.servers = 1;
  shape.partition_bytes = 4096;
  shape.scheduling_credit = 1;  // one partition: the next partition's second push always waits
  InProcessJob job(shape);
  Status st = job.Start();
  ASSERT_TRUE(st.ok()) << st.message();
  constexpr int64_t kCount = 64 * 1024;  // 64 partitions of 4 KB
  constexpr int kRanks = 3;
  std::vector<float> in[kRanks], out[kRanks];
  Completion done[kRanks];
  for (int r = 0; r < kRanks; ++r) {
    in[r] = Contribution<float>(r, kCount, 0);
    out[r].assign(kCount, -1);
    TensorView t{};
    t.dtype = static_cast<int32_t>(DataType::kFloat32);
    t.num_elements = kCount;
    t.device = -1;
    t.data = in[r].data();
    ASSERT_TRUE(job.rank(r).Submit(t, out[r].data(), "g", 0, ReduceOp::kSum, Completion::Callback, &done[r]).ok());
  }
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(done[r].Wait(30)) << "rank " << r;
    ASSERT_EQ(done[r].code, StatusCode::kOk) << done[r].message;
    for (int64_t i = 0; i < kCount; ++i) ASSERT_EQ(out[r][i], (Expected<float>(kRanks, i, 0, false))) << i;
  }
  // Rank 2 is machine 1's only rank: two pushes per partition. A pass that
  // moves something is counted; a partition needs a handful (turn, stage,
  // push, answer, gather), each woken by an event. Spinning counts
  // thousands per receipt.
  const std::string stats = job.rank(2).StatsJson();
  const size_t at = stats.find("\"engine_passes\": ");
  ASSERT_NE(at, std::string::npos) << stats;
  const long passes = std::stol(stats.substr(at + 17));
  EXPECT_LT(passes, 64 * 12) << stats;
  job.Stop();
}

TEST(EngineInProcessFailure, ARankFailingMidRoundFailsTheOthersWithItsCause) {
  JobShape shape{3, 1, 2};
  shape.timeout_seconds = 60;
  InProcessJob job(shape);
  Status st = job.Start();
  ASSERT_TRUE(st.ok()) << st.message();
  PushPullOnRanks(job, {0, 1, 2}, "warmup");
  PendingOp op0, op1;
  ASSERT_TRUE(op0.Submit(job.rank(0), "gradient").ok());
  ASSERT_TRUE(op1.Submit(job.rank(1), "gradient").ok());
  // Rank 2 never pushes "gradient": it fails and shuts down instead.
  job.rank(2).Fail(Status::PeerFailure("rank 2 ran out of memory"));
  job.rank(2).Shutdown();
  for (PendingOp* op : {&op0, &op1}) {
    ASSERT_TRUE(op->done.Wait(20)) << "a pending op hung after a peer failed";
    EXPECT_EQ(op->done.code, StatusCode::kPeerFailure) << op->done.message;
    EXPECT_NE(op->done.message.find("rank 2 ran out of memory"), std::string::npos) << op->done.message;
    EXPECT_NE(op->done.message.find("'gradient'"), std::string::npos) << op->done.message;
  }
  // Later submissions fail at once with the same cause.
  PendingOp later;
  st = later.Submit(job.rank(0), "next");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("rank 2 ran out of memory"), std::string::npos) << st.message();
}

// A rank whose engine is shut down in order while the others wait in a
// round: they fail by BYTEPS_TIMEOUT, naming what they waited for.
TEST(EngineInProcessFailure, ARankShutDownMidRoundTimesTheOthersOutNamingTheWait) {
  JobShape shape{2, 2, 1};
  shape.timeout_seconds = 1.5;
  InProcessJob job(shape);
  Status st = job.Start();
  ASSERT_TRUE(st.ok()) << st.message();
  PushPullOnRanks(job, {0, 1, 2, 3}, "warmup");
  PendingOp ops[3];
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(ops[r].Submit(job.rank(r), "gradient").ok());
  job.rank(3).Shutdown();  // machine 1's local rank 1 leaves before pushing "gradient"
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(ops[r].done.Wait(20)) << "rank " << r << " hung after a peer shut down";
    EXPECT_NE(ops[r].done.code, StatusCode::kOk);
    EXPECT_NE(ops[r].done.message.find("'gradient'"), std::string::npos) << ops[r].done.message;
  }
  // Rank 2 shares machine 1 with the rank that left: it waited for it locally.
  EXPECT_NE(ops[2].done.message.find("waited for local ranks"), std::string::npos) << ops[2].done.message;
  // Machine 0's ranks waited for the server, or heard of rank 2's failure.
  for (int r = 0; r < 2; ++r) {
    const std::string& m = ops[r].done.message;
    EXPECT_TRUE(m.find("server 0") != std::string::npos || m.find("BYTEPS_TIMEOUT") != std::string::npos) << m;
  }
}

// Issue 20 item 12: a key table full of earlier names reclaims the least
// recently used ones (every new name used to fail once it was full), and a
// reclaimed name comes back with rounds that still agree.
TEST(EngineInProcessKeyTable, AFullKeyTableReclaimsEarlierNamesAndKnownNamesKeepWorking) {
  JobShape shape{1, 2, 0};
  shape.key_table_size = 16;
  InProcessJob job(shape);
  Status st = job.Start();
  ASSERT_TRUE(st.ok()) << st.message();
  for (int i = 0; i < 16; ++i) PushPullOnRanks(job, {0, 1}, "layer" + std::to_string(i));  // one key each
  for (int i = 0; i < 40; ++i) PushPullOnRanks(job, {0, 1}, "fresh" + std::to_string(i));
  PushPullOnRanks(job, {0, 1}, "layer3");  // reclaimed meanwhile: made again, rounds still agree
  PushPullOnRanks(job, {0, 1}, "layer3");
}

// A table full of partitions in flight makes a new name wait for a free
// entry, not fail: here rank 0 holds all 16 while rank 1 has not pushed yet.
TEST(EngineInProcessKeyTable, ANewNameWaitsWhileEveryEntryIsInFlight) {
  JobShape shape{1, 2, 0};
  shape.key_table_size = 16;
  InProcessJob job(shape);
  Status st = job.Start();
  ASSERT_TRUE(st.ok()) << st.message();
  std::vector<std::unique_ptr<PendingOp>> ops[2];
  for (int r = 0; r < 2; ++r) {
    for (int i = 0; i < 17; ++i) ops[r].push_back(std::make_unique<PendingOp>());
  }
  for (int i = 0; i < 17; ++i) ASSERT_TRUE(ops[0][i]->Submit(job.rank(0), "t" + std::to_string(i)).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(ops[0][16]->done.Wait(0)) << ops[0][16]->done.message;  // waits: no entry, no error
  for (int i = 0; i < 17; ++i) ASSERT_TRUE(ops[1][i]->Submit(job.rank(1), "t" + std::to_string(i)).ok());
  for (int r = 0; r < 2; ++r) {
    for (int i = 0; i < 17; ++i) {
      ASSERT_TRUE(ops[r][i]->done.Wait(20)) << "rank " << r << " op " << i << " hung";
      ASSERT_EQ(ops[r][i]->done.code, StatusCode::kOk) << ops[r][i]->done.message;
      ASSERT_EQ(ops[r][i]->out[999], 2.0f);
    }
  }
}

}  // namespace
}  // namespace bps
