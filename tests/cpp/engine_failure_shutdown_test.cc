// A failure from another thread racing the rank's shutdown (issue 30: a
// worker's SIGSEGV at exit after a failed first push_pull). The scheduler's
// abort watcher fails the engine from its own thread: the failure it latches
// completes the pending op (its FailMachine rings the machine's doorbell), the
// caller shuts down, and the shutdown freed the reducers while the watcher
// was still inside them (FailMachine, then Ring). The host reducer here is
// the real shared-memory one, wrapped so that local rank 0's FailMachine
// holds its caller at that point: the shutdown must wait for it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/engine.h"
#include "in_process_job.h"

namespace bps {
namespace {

using testing_support::Completion;
using testing_support::InProcessJob;
using testing_support::JobShape;

// Globals, not members: read after the reducer may have been freed.
std::atomic<bool> g_caller_inside{false};
std::atomic<bool> g_freed_under_caller{false};
std::atomic<bool> g_freed{false};

// The shared-memory reducer, every call forwarded; local rank 0's FailMachine
// keeps its caller until the reducer is freed or a second passed.
class HeldFailMachine : public LocalReducer {
 public:
  explicit HeldFailMachine(std::unique_ptr<LocalReducer> inner) : inner_(std::move(inner)) {}
  ~HeldFailMachine() override {
    if (inner_->local_rank() != 0) return;
    if (g_caller_inside) g_freed_under_caller = true;
    g_freed = true;
  }

  void FailMachine(const std::string& why) override {
    inner_->FailMachine(why);  // rings the doorbell: the engine thread fails the op now
    if (inner_->local_rank() != 0) return;
    g_caller_inside = true;
    // Sequencing, not a measurement: before the fix the shutdown freed this
    // reducer within milliseconds; with it, it waits for this call.
    for (int i = 0; i < 100 && !g_freed; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    g_caller_inside = false;  // nothing of `this` is touched from here
  }

  const char* name() const override { return inner_->name(); }
  int local_rank() const override { return inner_->local_rank(); }
  int local_size() const override { return inner_->local_size(); }
  std::vector<Range> PlanPartitions(int64_t count, int64_t elem_size, int64_t partition_bytes, int num_servers,
                                    const std::vector<int>& job_local_sizes) const override {
    return inner_->PlanPartitions(count, elem_size, partition_bytes, num_servers, job_local_sizes);
  }
  Range SliceOfLayout(int64_t count, int L, int q) const override { return inner_->SliceOfLayout(count, L, q); }
  bool Progress() override { return inner_->Progress(); }
  bool Settled(LocalPartition* p, uint32_t round) override { return inner_->Settled(p, round); }
  Status Acquire(uint64_t key, uint64_t bytes, DataType dtype, LocalPartition** out) override {
    return inner_->Acquire(key, bytes, dtype, out);
  }
  void ReleasePartition(LocalPartition* p) override { inner_->ReleasePartition(p); }
  LocalProgress StageIn(LocalPartition* p, uint32_t round, const LocalContribution& c) override {
    return inner_->StageIn(p, round, c);
  }
  Status ReduceOwnSlice(LocalPartition* p, uint32_t round, const LocalContribution& c, char* also_into,
                        int64_t divisor, LocalProgress* progress) override {
    return inner_->ReduceOwnSlice(p, round, c, also_into, divisor, progress);
  }
  char* OwnSlice(LocalPartition* p, const LocalContribution& c) override { return inner_->OwnSlice(p, c); }
  void PublishOwnSlice(LocalPartition* p, uint32_t round) override { inner_->PublishOwnSlice(p, round); }
  Status Gather(LocalPartition* p, uint32_t round, const LocalContribution& c, char* output, int64_t divisor,
                uint32_t* gathered, LocalProgress* progress) override {
    return inner_->Gather(p, round, c, output, divisor, gathered, progress);
  }
  void CloseFailedRound(LocalPartition* p, uint64_t key, uint64_t bytes, DataType dtype, uint32_t round,
                        const Status& why, bool staged) override {
    inner_->CloseFailedRound(p, key, bytes, dtype, round, why, staged);
  }
  void FailRound(LocalPartition* p, uint32_t round, const Status& why) override { inner_->FailRound(p, round, why); }
  std::string DescribeStaging(LocalPartition* p, uint32_t round) override { return inner_->DescribeStaging(p, round); }
  uint32_t Doorbell() override { return inner_->Doorbell(); }
  void Ring() override { inner_->Ring(); }
  void WaitDoorbell(uint32_t seen, int timeout_ms) override { inner_->WaitDoorbell(seen, timeout_ms); }
  Status CheckPeers(bool check_alive) override { return inner_->CheckPeers(check_alive); }
  void Leave() override { inner_->Leave(); }
  uint64_t staging_bytes() override { return inner_->staging_bytes(); }
  uint64_t staging_backed_bytes() override { return inner_->staging_backed_bytes(); }
  uint64_t staging_reserve_bytes() override { return inner_->staging_reserve_bytes(); }
  uint64_t keys_used() override { return inner_->keys_used(); }
  CollectiveOrderShm* order_channel() override { return inner_->order_channel(); }

 private:
  std::unique_ptr<LocalReducer> inner_;
};

Status CreateHeldFailMachine(const Config& config, Store* store, std::unique_ptr<LocalReducer>* out) {
  std::unique_ptr<LocalReducer> shm;
  BPS_RETURN_IF_ERROR(CreateShmLocalReducer(config, store, &shm));
  out->reset(new HeldFailMachine(std::move(shm)));
  return Status::OK();
}

TEST(EngineFailureShutdown, ShutdownWaitsForAFailureRaisedOnAnotherThread) {
  JobShape shape;
  shape.local_size = 2;
  shape.host_reducer = &CreateHeldFailMachine;
  InProcessJob job(shape);
  ASSERT_TRUE(job.Start().ok());

  // Rank 0's op waits for local rank 1, which never submits it.
  std::vector<float> data(1024, 1.0f);
  TensorView t{};
  t.data = data.data();
  t.dtype = static_cast<int32_t>(DataType::kFloat32);
  t.num_elements = static_cast<int64_t>(data.size());
  t.device = -1;
  Completion op;
  ASSERT_TRUE(job.rank(0).Submit(t, data.data(), "grad.a", 0, ReduceOp::kSum, Completion::Callback, &op).ok());

  // As the abort watcher does: the verdict from a thread of its own.
  std::thread watcher([&] { job.rank(0).Fail(Status::PeerFailure("job aborted: worker 1 (test) disconnected")); });
  ASSERT_TRUE(op.Wait(30)) << "the failure did not complete the pending op";
  EXPECT_EQ(op.code, StatusCode::kPeerFailure) << op.message;
  EXPECT_NE(op.message.find("job aborted: worker 1 (test)"), std::string::npos) << op.message;
  // As the failed script's exit does (atexit: shutdown()).
  job.rank(0).Shutdown();
  watcher.join();
  EXPECT_TRUE(g_freed) << "rank 0's reducer was not released by its shutdown";
  EXPECT_FALSE(g_freed_under_caller)
      << "the shutdown freed the reducers while the failing thread was still inside FailMachine";
}

}  // namespace
}  // namespace bps
