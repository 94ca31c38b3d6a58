// A failure from another thread racing the rank's shutdown (issue 30: a
// worker's SIGSEGV at exit after a failed first push_pull). The scheduler's
// abort watcher fails the engine from its own thread: the failure it latches
// completes the pending op (its FailMachine rings the machine's doorbell), the
// caller shuts down, and the shutdown freed the reducers while the watcher
// was still inside them (FailMachine, then Ring). The machine group here (MachinePeers) is
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

// The shared-memory machine group, every call forwarded; local rank 0's
// FailMachine keeps its caller until the group is freed or a second passed.
class HeldFailMachine : public MachinePeers {
 public:
  HeldFailMachine(std::unique_ptr<MachinePeers> inner, int local_rank)
      : inner_(std::move(inner)), local_rank_(local_rank) {}
  ~HeldFailMachine() override {
    if (local_rank_ != 0) return;
    if (g_caller_inside) g_freed_under_caller = true;
    g_freed = true;
  }

  void FailMachine(const std::string& why) override {
    inner_->FailMachine(why);  // rings the doorbell: the engine thread fails the op now
    if (local_rank_ != 0) return;
    g_caller_inside = true;
    // Sequencing, not a measurement: before the fix the shutdown freed this
    // group within milliseconds; with it, it waits for this call.
    for (int i = 0; i < 100 && !g_freed; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    g_caller_inside = false;  // nothing of `this` is touched from here
  }

  Status CheckPeers(bool check_alive) override { return inner_->CheckPeers(check_alive); }
  uint32_t Doorbell() override { return inner_->Doorbell(); }
  void Ring() override { inner_->Ring(); }
  void RingSelf() override { inner_->RingSelf(); }
  void WaitDoorbell(uint32_t seen, int timeout_ms) override { inner_->WaitDoorbell(seen, timeout_ms); }
  void Leave() override { inner_->Leave(); }
  CollectiveOrderShm* order_channel() override { return inner_->order_channel(); }

 private:
  std::unique_ptr<MachinePeers> inner_;
  const int local_rank_;
};

Status CreateHeldFailMachine(const Config& config, Store* store, HostReducer* out) {
  BPS_RETURN_IF_ERROR(CreateShmLocalReducer(config, store, out));
  out->peers.reset(new HeldFailMachine(std::move(out->peers), config.local_rank));
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
  EXPECT_TRUE(g_freed) << "rank 0's machine group was not released by its shutdown";
  EXPECT_FALSE(g_freed_under_caller)
      << "the shutdown freed the machine group while the failing thread was still inside FailMachine";
}

}  // namespace
}  // namespace bps
