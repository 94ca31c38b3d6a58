// The ordering rule of csrc/local/local_reducer.h on CPU: whole in-process
// jobs whose device tensors go through the sequenced reducer over emulated
// NCCL collectives (emulated_collectives.h), which fails, naming both ranks,
// whenever two local ranks issue different collectives as their n-th one.
// Every rank submits its tensors in its own random order with random pauses.
//   - machine order (local rank 0 decides): exact sums, no violation;
//   - each rank in its own order (how the GPU path issued its collectives
//     before the rule): the emulation catches the divergence, and the job
//     fails loudly instead of hanging.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "emulated_collectives.h"
#include "in_process_job.h"
#include "shuffled_device_job.h"

namespace bps {
namespace {

using testing_support::Completion;
using testing_support::EmulatedOrderMode;
using testing_support::InProcessJob;
using testing_support::HostAsDeviceMemory;
using testing_support::JobShape;
using testing_support::ShuffledOutcome;
using testing_support::ShuffledValue;

// The emulation's engines: every device tensor through its sequenced reducer.
EngineOptions Emulated() {
  EngineOptions options;
  options.device_reducer = &testing_support::MakeEmulatedDeviceReducer;
  return options;
}

ShuffledOutcome RunShuffled(InProcessJob& job, uint32_t seed, bool distinct_priorities) {
  HostAsDeviceMemory memory;
  return testing_support::RunShuffled(job, memory, seed, distinct_priorities);
}

class CollectiveOrderTest : public ::testing::TestWithParam<JobShape> {
 protected:
  void TearDown() override { EmulatedOrderMode() = CollectiveOrder::Mode::kMachineOrder; }
};

TEST_P(CollectiveOrderTest, TheMachineOrderGivesExactSumsWhateverOrderRanksSubmitIn) {
  EmulatedOrderMode() = CollectiveOrder::Mode::kMachineOrder;
  for (uint32_t seed : {1u, 2u, 3u}) {
    InProcessJob job(GetParam(), Emulated());
    Status st = job.Start();
    ASSERT_TRUE(st.ok()) << st.message();
    ShuffledOutcome o = RunShuffled(job, seed, /*distinct_priorities=*/seed == 3);
    EXPECT_FALSE(o.hung) << "seed " << seed;
    EXPECT_EQ(o.failed, 0) << "seed " << seed << ": " << o.first_error;
    EXPECT_EQ(o.wrong, 0) << "seed " << seed << ": " << o.first_wrong;
    EXPECT_EQ(o.completed, job.size() * 3 * static_cast<int>(testing_support::ShuffledTensors().size())) << "seed " << seed;
    job.Stop();
  }
}

// The engine thread issues device work only a bounded number of bytes
// ahead of what it saw finish (BYTEPS_DEVICE_COPY_AHEAD_BYTES). At its
// tightest, one partition at a time, the ranks of a machine still issue the
// same order at their own pace: exact sums, no violation, nothing hangs.
TEST_P(CollectiveOrderTest, OnePartitionCopiedAheadAtATimeStillGivesExactSums) {
  EmulatedOrderMode() = CollectiveOrder::Mode::kMachineOrder;
  JobShape shape = GetParam();
  shape.device_copy_ahead_bytes = 1;
  InProcessJob job(shape, Emulated());
  ASSERT_TRUE(job.Start().ok());
  ShuffledOutcome o = RunShuffled(job, 4, /*distinct_priorities=*/true);
  job.Stop();
  EXPECT_FALSE(o.hung);
  EXPECT_EQ(o.failed, 0) << o.first_error;
  EXPECT_EQ(o.wrong, 0) << o.first_wrong;
  EXPECT_EQ(o.completed, job.size() * 3 * static_cast<int>(testing_support::ShuffledTensors().size()));
}

INSTANTIATE_TEST_SUITE_P(Layouts, CollectiveOrderTest,
                         ::testing::Values(JobShape{2, 2, 2},   // two machines of two GPUs
                                           JobShape{2, 3, 1},   // three local ranks, padded slices
                                           JobShape{2, 1, 2},   // one GPU per machine: no local collective peers
                                           // machines of different sizes (issue 29): lcm-unit partitions
                                           JobShape{0, 0, 1, 4096, 20, 8192, {2, 1}},
                                           JobShape{0, 0, 2, 4096, 20, 8192, {3, 1}},
                                           JobShape{0, 0, 2, 4096, 20, 8192, {2, 3}}),
                         testing_support::LayoutName);

// Across machines a stream-ordered result holds the caller's stream until
// the engine saw it in the output: each hold is released once, and only for
// ops that completed with the exact sum (the checks of RunShuffled).
TEST_P(CollectiveOrderTest, StreamOrderedResultsAcrossMachinesReleaseEachHoldOnce) {
  EmulatedOrderMode() = CollectiveOrder::Mode::kMachineOrder;
  using testing_support::EmulatedCollectives;
  const int64_t opened = EmulatedCollectives::HoldsOpened(), released = EmulatedCollectives::HoldsReleased();
  JobShape shape = GetParam();
  shape.gpu_stream_ordered = true;
  InProcessJob job(shape, Emulated());
  ASSERT_TRUE(job.Start().ok());
  ASSERT_TRUE(job.rank(0).DevicePushPullStreamOrdered());
  HostAsDeviceMemory memory;
  ShuffledOutcome o = testing_support::RunShuffled(job, memory, 5, /*distinct_priorities=*/true,
                                                   testing_support::SubmitOrder::kShuffled, 3, /*stream_ordered=*/true);
  job.Stop();
  EXPECT_FALSE(o.hung);
  EXPECT_EQ(o.failed, 0) << o.first_error;
  EXPECT_EQ(o.wrong, 0) << o.first_wrong;
  const int64_t ops = job.size() * 3 * static_cast<int64_t>(testing_support::ShuffledTensors().size());
  EXPECT_EQ(o.completed, ops);
  EXPECT_EQ(EmulatedCollectives::HoldsOpened() - opened, ops);
  EXPECT_EQ(EmulatedCollectives::HoldsReleased() - released, ops);
  EXPECT_EQ(EmulatedCollectives::HoldsReleasedTwice().load(), 0);
}

// A stream-ordered op that fails after its caller moved on can only reach
// the caller through the engine's latch: its hold is released (the stream
// goes on) and the rank's next call fails naming the tensor.
TEST(CollectiveOrderStreamOrdered, AFailureAfterTheCallerMovedOnIsReleasedAndFailsTheNextCall) {
  EmulatedOrderMode() = CollectiveOrder::Mode::kMachineOrder;
  using testing_support::EmulatedCollectives;
  const int64_t released = EmulatedCollectives::HoldsReleased();
  JobShape shape{2, 1, 1};
  shape.timeout_seconds = 10;
  shape.gpu_stream_ordered = true;
  InProcessJob job(shape, Emulated());
  ASSERT_TRUE(job.Start().ok());
  HostAsDeviceMemory memory;
  // The machines disagree on the tensor's size: the server names the mismatch.
  std::vector<float> in0(100, 1.0f), out0(100), in1(200, 1.0f), out1(200);
  Completion done0, done1;
  TensorView t0{};
  t0.data = in0.data();
  t0.dtype = static_cast<int32_t>(DataType::kFloat32);
  t0.num_elements = 100;
  t0.device = 0;
  TensorView t1 = t0;
  t1.data = in1.data();
  t1.num_elements = 200;
  ASSERT_TRUE(job.rank(0).Submit(t0, out0.data(), "weights", 0, ReduceOp::kSum, Completion::Callback, &done0, nullptr,
                                 memory.ResultStream(0)).ok());
  ASSERT_TRUE(job.rank(1).Submit(t1, out1.data(), "weights", 0, ReduceOp::kSum, Completion::Callback, &done1, nullptr,
                                 memory.ResultStream(0)).ok());
  ASSERT_TRUE(done0.Wait(20));
  ASSERT_TRUE(done1.Wait(20));
  EXPECT_NE(done0.code, StatusCode::kOk);
  EXPECT_NE(done1.code, StatusCode::kOk);
  EXPECT_EQ(EmulatedCollectives::HoldsReleased() - released, 2);
  EXPECT_EQ(EmulatedCollectives::HoldsReleasedTwice().load(), 0);
  for (int r = 0; r < 2; ++r) {
    Completion next;
    std::vector<float> in(8, 1.0f), out(8);
    TensorView t{};
    t.data = in.data();
    t.dtype = static_cast<int32_t>(DataType::kFloat32);
    t.num_elements = 8;
    t.device = 0;
    Status st = job.rank(r).Submit(t, out.data(), "next", 0, ReduceOp::kSum, Completion::Callback, &next);
    EXPECT_FALSE(st.ok()) << "rank " << r << " went on after a stream-ordered op failed";
    EXPECT_NE(st.message().find("'weights'"), std::string::npos) << st.message();
  }
  job.Stop();
}

// Alone on its machine a rank's order is its own scheduling order, not the
// order of its announcements: the reducer issues a bounded amount ahead, so a
// partition announced later with a higher priority (under cross-barrier the
// first layer, whose gradient backward makes last) goes before the earlier,
// larger tensor's partitions still waiting, and steps of equal priority keep
// their submission order.
TEST(CollectiveOrderOneRank, AStepAnnouncedLaterWithAHigherPriorityIssuesFirst) {
  CollectiveOrder order(nullptr, 0, 1, CollectiveOrder::Mode::kMachineOrder, [] {});
  for (uint32_t p = 0; p < 4; ++p) {
    order.Announce(/*key=*/100 + p, 0, CollectiveStep::kReduceScatter, /*priority=*/-30, /*seq=*/1, p, 0, 8, "classifier");
  }
  // Two issued before the first layer's gradient exists.
  std::vector<uint64_t> issued;
  for (int i = 0; i < 2; ++i) issued.push_back(order.NextBatch().at(0).key);
  order.Announce(200, 0, CollectiveStep::kReduceScatter, /*priority=*/0, /*seq=*/2, 0, 0, 8, "features.0");
  order.Announce(201, 0, CollectiveStep::kReduceScatter, /*priority=*/0, /*seq=*/2, 1, 0, 8, "features.0");
  // An answer's upload: announced without a priority of its own.
  order.Announce(100, 0, CollectiveStep::kAllGather, 0, 0, 0, 0, 8, "");
  for (std::vector<CollectiveOrder::Step> b = order.NextBatch(); !b.empty(); b = order.NextBatch()) {
    ASSERT_EQ(b.size(), 1u);
    issued.push_back(b[0].key + (b[0].step == CollectiveStep::kAllGather ? 1000 : 0));
  }
  EXPECT_EQ(issued, (std::vector<uint64_t>{100, 101, 1100, 200, 201, 102, 103}));
}

TEST(CollectiveOrderOwnOrder, EachRankIssuingInItsOwnOrderBreaksTheContractAndFailsLoudly) {
  EmulatedOrderMode() = CollectiveOrder::Mode::kOwnOrder;
  JobShape shape{2, 2, 2};
  shape.timeout_seconds = 10;
  InProcessJob job(shape, Emulated());
  Status st = job.Start();
  ASSERT_TRUE(st.ok()) << st.message();
  ShuffledOutcome o = RunShuffled(job, 1, false);
  job.Stop();
  EmulatedOrderMode() = CollectiveOrder::Mode::kMachineOrder;
  // With NCCL this is the 2 x 2 stall: each GPU waits inside its first
  // collective for a peer that issued another one.
  EXPECT_FALSE(o.hung);
  EXPECT_GT(o.failed, 0);
  EXPECT_NE(o.first_error.find("differs between local ranks"), std::string::npos) << o.first_error;
}

TEST(CollectiveOrderOneMachine, TheFusedPathReducesWholeTensorsInSubmissionOrder) {
  EmulatedOrderMode() = CollectiveOrder::Mode::kMachineOrder;
  InProcessJob job(JobShape{1, 3, 0}, Emulated());
  ASSERT_TRUE(job.Start().ok());
  EXPECT_TRUE(job.rank(0).DeviceStreamOrdered());
  constexpr int64_t kCount = 3001;
  std::vector<std::vector<float>> in(3), out(3);
  std::vector<Completion> done(3);
  for (int r = 0; r < 3; ++r) {
    for (int64_t i = 0; i < kCount; ++i) in[r].push_back(static_cast<float>(ShuffledValue(r, i, 0)));
    out[r].assign(kCount, -1);
    TensorView t{};
    t.data = in[r].data();
    t.dtype = static_cast<int32_t>(DataType::kFloat32);
    t.num_elements = kCount;
    t.device = 0;
    Status st = job.rank(r).Submit(t, out[r].data(), "fused", 0, ReduceOp::kAverage, Completion::Callback, &done[r]);
    ASSERT_TRUE(st.ok()) << st.message();
  }
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(done[r].Wait(20));
    ASSERT_EQ(done[r].code, StatusCode::kOk) << done[r].message;
    for (int64_t i = 0; i < kCount; ++i) {
      const double sum = ShuffledValue(0, i, 0) + ShuffledValue(1, i, 0) + ShuffledValue(2, i, 0);
      ASSERT_EQ(out[r][i], static_cast<float>(sum / 3)) << "rank " << r << " element " << i;
    }
  }
  job.Stop();
}

TEST(CollectiveOrderCpuBuild, ADeviceTensorWithoutADeviceReducerIsRefusedNamingTheBuild) {
  EngineOptions cpu_only;
  cpu_only.device_reducer = nullptr;  // what a build without CUDA has
  InProcessJob job(JobShape{1, 2, 0}, cpu_only);
  ASSERT_TRUE(job.Start().ok());
  std::vector<float> v(10, 1.0f);
  TensorView t{};
  t.data = v.data();
  t.dtype = static_cast<int32_t>(DataType::kFloat32);
  t.num_elements = 10;
  t.device = 0;
  Completion done;
  Status st = job.rank(0).Submit(t, v.data(), "on_gpu", 0, ReduceOp::kSum, Completion::Callback, &done);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("built without CUDA"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("on_gpu"), std::string::npos) << st.message();
  job.Stop();
}

}  // namespace
}  // namespace bps

namespace bps {
namespace {

// Local ranks disagreeing on a device tensor's shape: local rank 0 finds it
// in the announcements and no collective is issued; every rank's op fails
// naming both shapes, and the next tensor still goes through.
TEST(CollectiveOrderFailures, LocalRanksDisagreeingOnAShapeAllFailNamingBothAndTheJobGoesOn) {
  EmulatedOrderMode() = CollectiveOrder::Mode::kMachineOrder;
  JobShape shape{2, 2, 1};
  InProcessJob job(shape, Emulated());
  ASSERT_TRUE(job.Start().ok());
  auto submit = [&](int r, const std::string& name, std::vector<float>& v, Completion* done) {
    TensorView t{};
    t.data = v.data();
    t.dtype = static_cast<int32_t>(DataType::kFloat32);
    t.num_elements = static_cast<int64_t>(v.size());
    t.device = 0;
    return job.rank(r).Submit(t, v.data(), name, 0, ReduceOp::kSum, Completion::Callback, done);
  };
  std::vector<std::vector<float>> bad(4), good(4);
  std::vector<Completion> bad_done(4), good_done(4);
  for (int r = 0; r < 4; ++r) {
    bad[r].assign(r == 1 ? 600 : 500, 1.0f);  // rank 1 (machine 0, local rank 1) disagrees
    good[r].assign(300, static_cast<float>(r + 1));
    ASSERT_TRUE(submit(r, "bad", bad[r], &bad_done[r]).ok());
  }
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(bad_done[r].Wait(20)) << "rank " << r << " hung on the disagreeing tensor";
    EXPECT_NE(bad_done[r].code, StatusCode::kOk) << "rank " << r;
  }
  // Machine 0's ranks name both shapes; machine 1's learn it through the servers.
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(bad_done[r].message.find("[500]"), std::string::npos) << bad_done[r].message;
    EXPECT_NE(bad_done[r].message.find("[600]"), std::string::npos) << bad_done[r].message;
  }
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(submit(r, "good", good[r], &good_done[r]).ok());
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(good_done[r].Wait(20));
    ASSERT_EQ(good_done[r].code, StatusCode::kOk) << good_done[r].message;
    EXPECT_EQ(good[r][0], 10.0f);
    EXPECT_EQ(good[r][299], 10.0f);
  }
  job.Stop();
}

}  // namespace
}  // namespace bps

namespace bps {
namespace {

// A local rank that goes away while its peers wait in the machine's order:
// they fail within the timeout naming what they waited for, never hang.
TEST(CollectiveOrderFailures, ALocalRankLeavingMidRoundFailsItsPeersNamingTheWait) {
  EmulatedOrderMode() = CollectiveOrder::Mode::kMachineOrder;
  JobShape shape{2, 2, 1};
  shape.timeout_seconds = 3;
  InProcessJob job(shape, Emulated());
  ASSERT_TRUE(job.Start().ok());
  std::vector<std::vector<float>> v(4, std::vector<float>(1000, 1.0f));
  std::vector<Completion> done(4);
  for (int r : {0, 2, 3}) {
    TensorView t{};
    t.data = v[r].data();
    t.dtype = static_cast<int32_t>(DataType::kFloat32);
    t.num_elements = 1000;
    t.device = 0;
    ASSERT_TRUE(job.rank(r).Submit(t, v[r].data(), "w", 0, ReduceOp::kSum, Completion::Callback, &done[r]).ok());
  }
  job.rank(1).Shutdown();  // local rank 1 of machine 0 never submits "w"
  for (int r : {0, 2, 3}) {
    ASSERT_TRUE(done[r].Wait(15)) << "rank " << r << " hung";
    EXPECT_NE(done[r].code, StatusCode::kOk) << "rank " << r;
  }
  EXPECT_NE(done[0].message.find("reduce-scatter waits for every local rank"), std::string::npos) << done[0].message;
  job.Stop();
}

}  // namespace
}  // namespace bps
