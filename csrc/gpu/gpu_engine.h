// The GPU data path (CUDA build only): push_pull of tensors in device memory,
// one GPU per process, inside the same libbyteps_engine.so as the CPU engine.
//
// One machine: one NCCL all-reduce among the local ranks.
// Several machines, per partition, pipelined:
//
//   reduce stream  [wait caller's stream] NCCL reduce-scatter (this rank's slice)
//   copy stream    slice D2H into pinned staging
//   stager thread  once staged: Engine::SubmitMachineReduced (servers sum the
//                  slice across machines, straight back into the staging)
//   gather thread  once back, in submission order: H2D, NCCL all-gather
//   completion     once the last all-gather's event fired: done(user, status)
//
// The caller's stream is ordered before our work with an event; nothing on
// the hot path synchronises the device. `done` runs on a host thread after
// the result is in device memory, never inside a CUDA callback.
//
// Ordering contract (as for NCCL and c10d): every local rank submits its GPU
// tensors in the same order. Across machines any order works.
#pragma once
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "c_api/byteps_c.h"
#include "common/dtype.h"
#include "common/status.h"
#include "gpu/local_communicators.h"
#include "gpu/pinned_staging.h"
#include "store/store.h"

namespace bps {
namespace gpu {

// Entry points for the C ABI (csrc/c_api/c_api.cc, CUDA build).
// `stream`: the caller's cudaStream_t; nullptr is the legacy default stream.
Status SubmitOnStream(const bps_tensor& input, void* output, const std::string& name, int32_t priority,
                      int32_t reduce_op, bps_done_fn done, void* user_data, void* stream);
// JSON object of the GPU path's counters (pinned staging bytes, ...).
std::string StatsJson();
// "cuda: yes (runtime 13.0, driver 13.0); nccl: 2.28.9".
std::string BuildInfo();

struct GpuOp;

// One partition of a GPU op on the several-machines path.
struct GpuPartition {
  GpuOp* op = nullptr;
  int index = 0;
  int64_t offset = 0;   // elements of the tensor
  int64_t count = 0;    // elements in this partition
  int64_t chunk = 0;    // elements per local rank (count padded up to L * chunk)
  bool padded = false;  // count % L != 0: reduced in a device scratch copy
  char* scratch = nullptr;   // device, L * chunk elements, when padded
  char* staging = nullptr;   // pinned host, chunk elements: this rank's slice
  cudaEvent_t reduced = nullptr;  // reduce-scatter done (copy stream waits on it)
  cudaEvent_t staged = nullptr;   // slice is in host staging
  std::atomic<int> net{0};        // 0 on the network, 1 back, 2 failed
  int net_code = BPS_OK;
  std::string net_error;
};

struct GpuOp {
  std::string name;
  const char* input = nullptr;
  char* output = nullptr;
  DataType dtype = DataType::kFloat32;
  size_t elem_size = 4;
  int64_t count = 0;
  int32_t priority = 0;
  int32_t reduce_op = BPS_REDUCE_SUM;
  bps_done_fn done = nullptr;
  void* user_data = nullptr;
  char* staging = nullptr;  // one pinned lease for all partitions' slices
  std::vector<std::unique_ptr<GpuPartition>> parts;
  cudaEvent_t ready = nullptr;     // the caller's stream at submission
  cudaEvent_t finished = nullptr;  // the last GPU work of this op
  Status error;                    // first failure (network), else OK
  std::chrono::steady_clock::time_point submitted;
};

class GpuEngine {
 public:
  static GpuEngine& Get();

  Status Submit(const bps_tensor& input, void* output, const std::string& name, int32_t priority, int32_t reduce_op,
                bps_done_fn done, void* user_data, cudaStream_t stream);
  std::string StatsJson();

 private:
  GpuEngine() = default;
  Status EnsureReady(int device);
  Status LaunchOneMachine(GpuOp* op, cudaStream_t caller);
  Status LaunchMachines(GpuOp* op, cudaStream_t caller);
  void PlanPartitions(GpuOp* op);
  void StagerLoop();
  void GatherLoop();
  void CompletionLoop();
  // Polls `event` (no device-wide sync), watching for NCCL async errors and
  // BYTEPS_TIMEOUT. kLatency when a host thread waits to act on the event,
  // kLazy when the device is already ordered after it.
  enum class Poll { kLatency, kLazy };
  Status WaitForEvent(cudaEvent_t event, const GpuOp& op, Poll poll);
  void Finish(std::unique_ptr<GpuOp> op, const Status& status);
  // Returns the op's events, staging lease and scratch memory (freed in
  // order on `free_on`, the stream that last used it); idempotent.
  void Release(GpuOp* op, cudaStream_t free_on);
  void Break(const Status& status);
  cudaEvent_t TakeEvent();
  void ReturnEvent(cudaEvent_t event);
  static void OnNetworkDone(void* user, int code, const char* message);

  std::mutex init_mu_;
  bool ready_ = false;
  int device_ = -1;
  int local_rank_ = 0, local_size_ = 1;
  bool distributed_ = false;
  int64_t partition_bytes_ = 4096000;
  double timeout_seconds_ = 300;
  std::weak_ptr<Store> store_;  // the engine initialisation our communicators belong to
  LocalCommunicators comms_;
  cudaStream_t reduce_stream_ = nullptr, copy_stream_ = nullptr, gather_stream_ = nullptr;
  std::atomic<int64_t> in_flight_{0};

  std::mutex launch_mu_;  // one submission at a time reaches NCCL: one order

  std::mutex broken_mu_;
  Status broken_;
  std::atomic<bool> is_broken_{false};

  std::mutex events_mu_;
  std::vector<cudaEvent_t> free_events_;

  PinnedStagingPool staging_;

  // Stager: partitions whose slice is on its way to host staging, FIFO.
  std::mutex stage_mu_;
  std::condition_variable stage_cv_;
  std::deque<GpuPartition*> stage_queue_;
  // Gather: every partition, in submission order; the head waits for the net.
  std::mutex gather_mu_;
  std::condition_variable gather_cv_;
  std::deque<GpuPartition*> gather_queue_;
  // Completion: ops whose last GPU work is queued, in completion order.
  std::mutex done_mu_;
  std::condition_variable done_cv_;
  std::deque<GpuOp*> done_queue_;
  std::vector<std::thread> threads_;

  std::atomic<uint64_t> ops_completed_{0}, bytes_reduced_{0}, partitions_networked_{0};
};

}  // namespace gpu
}  // namespace bps
