// NCCL as the machine's collective library (csrc/local/collectives.h), and
// the device reducer the CUDA build registers: the sequenced reducer over it.
//
// Streams: every collective, in the machine's order, on one high-priority
// stream with one communicator (as BytePS: reduce and broadcast share both);
// slices move to and from host staging on two copy streams (one per
// direction, so both copy engines work), ordered by events. Completion is a
// CUDA host function that rings this rank's engine (MachineLink::ring_self;
// no other local rank waits for this rank's streams): nothing polls the
// device in a loop and nothing on the hot path synchronises it.
//
// A stream stops at a host function until CUDA's callback thread ran it:
// one after every 1 MB copy holds the copy stream at 16 GB/s instead of 50,
// and cudaMemcpyAsync blocks the calling thread once the queue is long
// (benchmarks/gpu_copy_pipeline_probe.cu, issue 38). The engine therefore
// bounds what it queues ahead (Config::device_copy_ahead_bytes). Host
// functions on streams of their own, behind the work's events, copy at
// 46 GB/s but ring later: DDP steps took 5-10% longer (VGG-16 at 25 Gbit/s
// 238 against 227 ms, ResNet-50 at 10 Gbit/s 161 against 146 ms; calls 31-32).
#pragma once
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/config.h"
#include "gpu/pinned_staging.h"
#include "local/collectives.h"
#include "local/local_reducer.h"
#include "store/store.h"

namespace bps {
namespace gpu {

class NcclCollectives : public Collectives {
 public:
  // Collective among the machine's local ranks (NCCL's communicator set-up).
  static Status Create(const Config& config, Store* store, int device, std::function<void()> ring,
                       std::unique_ptr<Collectives>* out);
  ~NcclCollectives() override;

  const char* name() const override { return "nccl"; }
  void BeginBatch() override;
  Status EndBatch() override;
  Status ReduceScatter(CollectiveWork* w) override;
  Status Upload(CollectiveWork* w) override;
  Status AllGather(CollectiveWork* w) override;
  Status AllReduce(CollectiveWork* w, void* stream) override;
  bool ScalesAverage(DataType dtype) const override;
  Status Poll(CollectiveWork* w, CollectivePhase phase, bool* done) override;
  void Retire(CollectiveWork* w) override;
  Status AcquireStaging(uint64_t bytes, char** out) override { return staging_.Acquire(bytes, out); }
  void ReleaseStaging(char* buffer) override { staging_.Release(buffer); }
  uint64_t staging_bytes() override { return staging_.allocated_bytes(); }
  Status RecordReady(void* stream, void** event) override;
  void ReturnReady(void* event) override;
  Status HoldStream(void* stream, void** hold) override;
  void ReleaseHold(void* hold) override;
  bool CompressesSlices(const CodecHeader& push) const override;
  void ForgetCompression(SliceCompression* c) override;
  Status CheckAsync() override;
  void Abort() override;

 private:
  struct WorkState;
  struct Queued {
    CollectiveWork* work;
    bool gather;  // else reduce-scatter
  };
  NcclCollectives() = default;
  Status ConnectPeers();  // the first collectives, at set-up (NCCL connects lazily)
  WorkState* StateOf(CollectiveWork* w);
  Status Launch(const Queued& q);       // the NCCL call, inside the batch's group
  Status Before(const Queued& q);       // waits and copies the call needs first
  Status After(const Queued& q);        // events, copies and the doorbell after it
  ncclRedOp_t ReduceOpFor(DataType dtype, int64_t divisor);
  cudaEvent_t TakeEvent();
  void ReturnEvent(cudaEvent_t e);
  static void CUDART_CB RingFromStream(void* self);
  void ReleaseOpenHolds();

  int device_ = -1;
  int local_rank_ = 0;
  int local_size_ = 1;
  ncclComm_t comm_ = nullptr;
  std::atomic<bool> aborted_{false};
  cudaStream_t nccl_stream_ = nullptr, d2h_stream_ = nullptr, h2d_stream_ = nullptr;
  std::function<void()> ring_;
  std::vector<Queued> batch_;
  std::map<std::pair<int, int64_t>, ncclRedOp_t> premul_ops_;  // (dtype, divisor)
  std::mutex events_mu_;
  std::vector<cudaEvent_t> free_events_;
  std::vector<cudaEvent_t> all_events_;
  // Stream holds not released yet: released on Abort and at destruction, so
  // no caller's stream waits forever for an engine that is gone.
  std::mutex holds_mu_;
  std::set<void*> open_holds_;
  PinnedStagingPool staging_;
};

// The device reducer factory the CUDA build registers (SetDeviceReducerFactory).
Status MakeNcclLocalReducer(const Config& config, Store* store, int device, const MachineLink& link,
                            DeviceReducer* out);

// "cuda: yes (runtime 13.0, driver 13.0); nccl: 2.28.9".
std::string BuildInfo();

}  // namespace gpu
}  // namespace bps
