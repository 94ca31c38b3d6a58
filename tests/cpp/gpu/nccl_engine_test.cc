// The ordering rule's engine test (../shuffled_device_job.h) over real NCCL:
// whole in-process jobs (engines, servers over loopback TCP, shared memory
// between a machine's ranks) whose rank r reduces on cuda:r, each rank
// submitting its device tensors in its own random order with random pauses.
// Before the rule this is the 2 x 2 stall: two GPUs each spinning in a
// different first collective.
#include <gtest/gtest.h>

#include <iostream>

#include "cuda_memory.h"
#include "gpu/nccl_collectives.h"
#include "in_process_job.h"
#include "local/sequenced_reducer.h"
#include "shuffled_device_job.h"

namespace bps {
namespace testing_support {
namespace {

class NcclEngine : public ::testing::TestWithParam<JobShape> {};

TEST_P(NcclEngine, TheMachineOrderGivesExactSumsWhateverOrderRanksSubmitIn) {
  InProcessJob probe(GetParam());
  if (CudaDeviceCount() < probe.size()) {
    GTEST_SKIP() << "needs " << probe.size() << " GPUs";
  }
  const bool one_machine = GetParam().machine_count() == 1 && GetParam().servers == 0;
  CudaMemory memory;
  for (uint32_t seed : {1u, 2u}) {
    InProcessJob job(GetParam());  // EngineOptions' default: the NCCL reducer this build registered
    Status st = job.Start();
    ASSERT_TRUE(st.ok()) << st.message();
    if (one_machine) ASSERT_TRUE(job.rank(0).DeviceStreamOrdered());
    // One machine takes the fused path: one order on every rank, as NCCL's own.
    ShuffledOutcome o = RunShuffled(job, memory, seed, /*distinct_priorities=*/seed == 2,
                                    one_machine ? SubmitOrder::kSame : SubmitOrder::kShuffled);
    EXPECT_FALSE(o.hung) << "seed " << seed;
    EXPECT_EQ(o.failed, 0) << "seed " << seed << ": " << o.first_error;
    EXPECT_EQ(o.wrong, 0) << "seed " << seed << ": " << o.first_wrong;
    EXPECT_EQ(o.completed, job.size() * 3 * static_cast<int>(ShuffledTensors().size())) << "seed " << seed;
    job.Stop();
  }
}

// Across machines a stream-ordered result makes the caller's result stream
// wait on the GPU (gpu/stream_hold.h) until the engine saw the sum in the
// output: every sum exact, and every result stream runs dry afterwards.
// Disabled: on 2 x H200 (2026-11-28) the 2 x 1 case hung (the release waits
// for the engine's later copies on the same GPU; see Config's
// gpu_stream_ordered). Run it with --gtest_also_run_disabled_tests.
TEST_P(NcclEngine, DISABLED_StreamOrderedResultsReleaseTheResultStreams) {
  JobShape probe = GetParam();
  if (probe.machine_count() == 1) GTEST_SKIP() << "one machine: the fused path, stream-ordered by an event";
  int gpus = 0;
  for (int m = 0; m < probe.machine_count(); ++m) gpus += probe.local_size_of(m);
  if (CudaDeviceCount() < gpus) GTEST_SKIP() << "needs " << gpus << " GPUs";
  CudaMemory memory;
  JobShape shape = GetParam();
  shape.gpu_stream_ordered = true;
  InProcessJob job(shape);
  ASSERT_TRUE(job.Start().ok());
  ASSERT_TRUE(job.rank(0).DevicePushPullStreamOrdered());
  ShuffledOutcome o = RunShuffled(job, memory, 3, /*distinct_priorities=*/true, SubmitOrder::kShuffled, 3,
                                  /*stream_ordered=*/true);
  EXPECT_FALSE(o.hung);
  EXPECT_EQ(o.failed, 0) << o.first_error;
  EXPECT_EQ(o.wrong, 0) << o.first_wrong;
  EXPECT_TRUE(o.result_streams_drained) << "a result stream still waits for a released result";
  job.Stop();
}

INSTANTIATE_TEST_SUITE_P(Layouts, NcclEngine,
                         ::testing::Values(JobShape{2, 2, 2},  // two machines of two GPUs
                                           JobShape{2, 1, 2},  // one GPU per machine: no communicator
                                           JobShape{1, 4, 0},  // one machine: the fused all-reduce
                                           // machines of different sizes (issue 29)
                                           JobShape{0, 0, 2, 4096, 20, 8192, {2, 1}},
                                           JobShape{0, 0, 2, 4096, 20, 8192, {3, 1}},
                                           JobShape{0, 0, 2, 4096, 20, 8192, {1, 3}}),
                         LayoutName);

// The GPU scheduling before the rule: every rank issues its collectives in
// its own order (what its framework thread and its network answers gave).
Status MakeNcclOwnOrderReducer(const Config& config, Store* store, int device, const MachineLink& link,
                               DeviceReducer* out) {
  std::unique_ptr<Collectives> nccl;
  BPS_RETURN_IF_ERROR(gpu::NcclCollectives::Create(config, store, device, link.ring, &nccl));
  return MakeSequencedReducer(config, std::move(nccl), link, out, CollectiveOrder::Mode::kOwnOrder);
}

// The 2 x 2 stall of issue 25 on real GPUs: with each rank in its own order,
// two GPUs of a machine wait inside different collectives (or NCCL pairs
// unrelated buffers). The watchdog fails the job and the communicators are
// aborted, so the test itself never hangs. scripts/gpu_cpp_tests.sh runs it
// in a process of its own: NCCL given mismatched calls is undefined.
TEST(NcclEngineOwnOrder, EachRankInItsOwnOrderStallsOrCorruptsWhereTheMachineOrderDoesNot) {
  if (CudaDeviceCount() < 4) {
    GTEST_SKIP() << "needs 4 GPUs";
  }
  JobShape shape{2, 2, 2};
  shape.timeout_seconds = 10;
  EngineOptions own_order;
  own_order.device_reducer = &MakeNcclOwnOrderReducer;
  InProcessJob job(shape, own_order);
  ASSERT_TRUE(job.Start().ok());
  CudaMemory memory;
  ShuffledOutcome o = RunShuffled(job, memory, 1, false);
  job.Stop();
  std::cout << "own order on NCCL: " << o.completed << " completed, " << o.failed << " failed, " << o.wrong
            << " wrong elements; first error: " << o.first_error << "; first wrong: " << o.first_wrong << std::endl;
  EXPECT_FALSE(o.hung) << "the watchdog and ncclCommAbort must end a stalled job";
  EXPECT_GT(o.failed + o.wrong, 0) << "each rank in its own order went through on NCCL: the test proves nothing";
}

}  // namespace
}  // namespace testing_support
}  // namespace bps
