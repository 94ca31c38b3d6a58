#include "gpu/gpu_engine.h"

#include <nccl.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "common/logging.h"
#include "c_api/process_engine.h"
#include "core/engine.h"
#include "common/partitioner.h"
#include "core/validation.h"
#include "gpu/cuda_status.h"

namespace bps {
namespace gpu {
namespace {

using Clock = std::chrono::steady_clock;

ncclDataType_t NcclType(DataType t) {
  switch (t) {
    case DataType::kFloat32: return ncclFloat32;
    case DataType::kFloat64: return ncclFloat64;
    case DataType::kFloat16: return ncclFloat16;
    case DataType::kBFloat16: return ncclBfloat16;
    case DataType::kInt32: return ncclInt32;
    case DataType::kInt64: return ncclInt64;
    case DataType::kUInt8: return ncclUint8;
  }
  return ncclFloat32;
}

// The CPU engine hands device tensors submitted through the plain
// bps_push_pull_async here: they are ordered after the legacy default stream.
Status HandleDeviceSubmit(const bps_tensor& input, void* output, const std::string& name, int32_t priority,
                          int32_t reduce_op, bps_done_fn done, void* user_data) {
  return GpuEngine::Get().Submit(input, output, name, priority, reduce_op, done, user_data, nullptr,
                                 /*caller_waits_on_stream=*/false);
}

struct RegisterWithEngine {
  RegisterWithEngine() {
    SetDeviceSubmitHandler(&HandleDeviceSubmit);
    SetDeviceStreamOrderedQuery([] {
      std::shared_ptr<Engine> engine = ProcessEngine::Get().engine();
      return engine && !engine->config().distributed();
    });
  }
} register_with_engine;

template <typename T>
T PopWhen(std::mutex& mu, std::condition_variable& cv, std::deque<T>& queue) {
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return !queue.empty(); });
  T item = queue.front();
  queue.pop_front();
  return item;
}

}  // namespace

GpuEngine& GpuEngine::Get() {
  static GpuEngine* engine = new GpuEngine();  // never destroyed: threads outlive statics
  return *engine;
}

Status GpuEngine::EnsureReady(int device) {
  std::lock_guard<std::mutex> lock(init_mu_);
  std::shared_ptr<Engine> engine = ProcessEngine::Get().engine();
  std::shared_ptr<Store> store = engine ? engine->store() : nullptr;
  if (!store) return Status(BPS_NOT_INITIALIZED, "byteps is not initialised: call init() first");
  if (ready_) {
    if (device != device_) {
      return Status::Invalid("this process pushes GPU tensors from cuda:" + std::to_string(device_) +
                             " but got one on cuda:" + std::to_string(device) +
                             ": byteps runs one GPU per process (the local rank's)");
    }
    if (store_.lock() == store) return Status::OK();
    // The engine was shut down and started again: new peers, new communicators.
    if (in_flight_.load() > 0) {
      return Status::Invalid("byteps was re-initialised while GPU push_pulls were still pending");
    }
    DeviceGuard guard(device_);
    if (is_broken_) {
      comms_.Abort();  // its kernels may be stuck on a dead peer
    } else {
      comms_.Destroy();
    }
    ready_ = false;
  }
  const Config& config = engine->config();
  int count = 0;
  BPS_CUDA_RETURN(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count) {
    return Status::Invalid("tensor is on cuda:" + std::to_string(device) + " but this process sees " +
                           std::to_string(count) + " GPUs");
  }
  if (device_ >= 0 && device != device_) {
    return Status::Invalid("byteps already drove cuda:" + std::to_string(device_) +
                           " in this process; one GPU per process");
  }
  DeviceGuard guard(device);
  if (!reduce_stream_) {
    // Communication outranks compute: a gradient bucket's reduce-scatter should
    // not queue behind the backward kernels it overlaps with.
    int least = 0, greatest = 0;
    BPS_CUDA_RETURN(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    const char* high = getenv("BYTEPS_GPU_HIGH_PRIORITY_STREAMS");  // default 1; 0: normal priority
    if (high && std::string(high) == "0") greatest = least;
    BPS_CUDA_RETURN(cudaStreamCreateWithPriority(&reduce_stream_, cudaStreamNonBlocking, greatest));
    BPS_CUDA_RETURN(cudaStreamCreateWithPriority(&copy_stream_, cudaStreamNonBlocking, greatest));
    BPS_CUDA_RETURN(cudaStreamCreateWithPriority(&gather_stream_, cudaStreamNonBlocking, greatest));
  }
  LocalCommunicators comms;
  BPS_RETURN_IF_ERROR(LocalCommunicators::Create(*store, config, &comms).WithContext(
      "setting up NCCL among the " + std::to_string(config.local_size) + " local ranks of machine " +
      std::to_string(config.worker_id)));
  comms_ = comms;
  device_ = device;
  local_rank_ = config.local_rank;
  local_size_ = config.local_size;
  distributed_ = config.distributed();
  partition_bytes_ = config.partition_bytes;
  timeout_seconds_ = config.timeout_seconds;
  store_ = store;
  {
    std::lock_guard<std::mutex> b(broken_mu_);
    broken_ = Status();
    is_broken_ = false;
  }
  if (threads_.empty()) {
    threads_.emplace_back([this] { StagerLoop(); });
    threads_.emplace_back([this] { GatherLoop(); });
    threads_.emplace_back([this] { CompletionLoop(); });
    for (auto& t : threads_) t.detach();
  }
  ready_ = true;
  BPS_LOG(Info) << "GPU path on cuda:" << device << " (" << (distributed_ ? "NCCL reduce-scatter/all-gather + servers"
                                                                          : "NCCL all-reduce")
                << " among " << local_size_ << " local ranks)";
  return Status::OK();
}

Status GpuEngine::Submit(const bps_tensor& input, void* output, const std::string& name, int32_t priority,
                         int32_t reduce_op, bps_done_fn done, void* user_data, cudaStream_t stream,
                         bool caller_waits_on_stream) {
  std::shared_ptr<Engine> engine = ProcessEngine::Get().engine();
  if (!engine || !engine->initialized()) {
    return Status(BPS_NOT_INITIALIZED, "byteps is not initialised: call init() first");
  }
  BPS_RETURN_IF_ERROR(ValidatePushPull(input, output, name, reduce_op, done));
  // One failure latch per rank: the engine's. A failed job (a dead peer, a
  // scheduler abort, an earlier GPU failure) refuses device work at once.
  BPS_RETURN_IF_ERROR(engine->failure());
  BPS_RETURN_IF_ERROR(EnsureReady(input.device));
  if (is_broken_) {
    std::lock_guard<std::mutex> lock(broken_mu_);
    return broken_;
  }
  DeviceGuard guard(device_);  // events and streams below belong to our GPU

  auto op = std::make_unique<GpuOp>();
  op->name = name;
  op->input = static_cast<const char*>(input.data);
  op->output = static_cast<char*>(output);
  op->dtype = static_cast<DataType>(input.dtype);
  op->elem_size = DataTypeSize(op->dtype);
  op->count = input.num_elements;
  op->priority = priority;
  op->reduce_op = reduce_op;
  op->done = done;
  op->user_data = user_data;
  op->caller_waits_on_stream = caller_waits_on_stream;
  op->submitted = Clock::now();
  op->ready = TakeEvent();
  op->finished = TakeEvent();
  if (!op->ready || !op->finished) {
    Release(op.get(), reduce_stream_);
    return Status::Internal("cudaEventCreate failed for '" + name + "'");
  }
  if (distributed_) {
    PlanPartitions(op.get());
    size_t bytes = 0;
    for (auto& p : op->parts) bytes += static_cast<size_t>(p->chunk) * op->elem_size;
    Status leased = staging_.Acquire(name, bytes, &op->staging);
    if (!leased.ok()) {
      Release(op.get(), reduce_stream_);
      return leased;
    }
    size_t at = 0;
    for (auto& p : op->parts) {
      p->staging = op->staging + at;
      at += static_cast<size_t>(p->chunk) * op->elem_size;
      p->reduced = TakeEvent();
      p->staged = TakeEvent();
      if (!p->reduced || !p->staged) {
        Release(op.get(), reduce_stream_);
        return Status::Internal("cudaEventCreate failed for '" + name + "'");
      }
    }
  }

  std::lock_guard<std::mutex> lock(launch_mu_);
  GpuOp* raw = op.get();
  in_flight_++;
  Status st = distributed_ ? LaunchMachines(raw, stream) : LaunchOneMachine(raw, stream);
  if (!st.ok()) {
    // Partially queued NCCL work would desynchronise the local ranks: fail
    // every later GPU push_pull with the cause instead of hanging them.
    // Nothing was queued to the host threads (the launches enqueue last),
    // so the op's events, staging lease and scratch come back here (bug 8).
    in_flight_--;
    Break(st.WithContext("push_pull of '" + name + "'"));
    Release(raw, reduce_stream_);  // the scratch was queued there
    return st;
  }
  op.release();  // owned by the queues until Finish
  return Status::OK();
}

void GpuEngine::PlanPartitions(GpuOp* op) {
  const int64_t L = local_size_;
  auto ranges = PlanEqualSlicePartitions(op->count, static_cast<int64_t>(op->elem_size), partition_bytes_, local_size_);
  for (size_t i = 0; i < ranges.size(); ++i) {
    auto p = std::make_unique<GpuPartition>();
    p->op = op;
    p->index = static_cast<int>(i);
    p->offset = ranges[i].offset;
    p->count = ranges[i].count;
    p->chunk = (p->count + L - 1) / L;
    p->padded = p->chunk * L != p->count;
    op->parts.push_back(std::move(p));
  }
}

Status GpuEngine::LaunchOneMachine(GpuOp* op, cudaStream_t caller) {
  BPS_CUDA_RETURN(cudaEventRecord(op->ready, caller));
  BPS_CUDA_RETURN(cudaStreamWaitEvent(reduce_stream_, op->ready, 0));
  if (local_size_ == 1) {
    // Alone on the machine: the sum is the input. (NCCL's one-rank average
    // of some odd float64 sizes left the last element unwritten: 2.28.9.)
    if (op->count > 0 && op->output != op->input) {
      BPS_CUDA_RETURN(cudaMemcpyAsync(op->output, op->input, op->count * op->elem_size, cudaMemcpyDeviceToDevice,
                                      reduce_stream_));
    }
  } else if (op->count > 0) {
    ncclRedOp_t red = op->reduce_op == BPS_REDUCE_AVERAGE ? ncclAvg : ncclSum;
    BPS_NCCL_RETURN(ncclAllReduce(op->input, op->output, static_cast<size_t>(op->count), NcclType(op->dtype), red,
                                  comms_.reduce, reduce_stream_));
  }
  BPS_CUDA_RETURN(cudaEventRecord(op->finished, reduce_stream_));
  // Stream-ordered completion: whatever the caller queues next on its stream
  // sees the result, without a host round trip (bps_device_stream_ordered).
  BPS_CUDA_RETURN(cudaStreamWaitEvent(caller, op->finished, 0));
  {
    std::lock_guard<std::mutex> lock(done_mu_);
    done_queue_.push_back(op);
  }
  done_cv_.notify_one();
  return Status::OK();
}

Status GpuEngine::LaunchMachines(GpuOp* op, cudaStream_t caller) {
  const size_t esz = op->elem_size;
  BPS_CUDA_RETURN(cudaEventRecord(op->ready, caller));
  BPS_CUDA_RETURN(cudaStreamWaitEvent(reduce_stream_, op->ready, 0));
  for (auto& part : op->parts) {
    GpuPartition* p = part.get();
    const size_t slice_bytes = static_cast<size_t>(p->chunk) * esz;
    const char* send = op->input + p->offset * esz;
    char* mine = op->output + (p->offset + local_rank_ * p->chunk) * esz;
    if (p->padded) {
      // NCCL slices are equal: reduce a copy padded to L * chunk elements.
      void* scratch = nullptr;
      BPS_CUDA_RETURN(cudaMallocAsync(&scratch, slice_bytes * local_size_, reduce_stream_));
      p->scratch = static_cast<char*>(scratch);
      BPS_CUDA_RETURN(cudaMemcpyAsync(p->scratch, send, p->count * esz, cudaMemcpyDeviceToDevice, reduce_stream_));
      send = p->scratch;
      mine = p->scratch + local_rank_ * slice_bytes;
    }
    if (p->chunk > 0 && local_size_ == 1) {
      if (mine != send) BPS_CUDA_RETURN(cudaMemcpyAsync(mine, send, slice_bytes, cudaMemcpyDeviceToDevice, reduce_stream_));
    } else if (p->chunk > 0) {
      BPS_NCCL_RETURN(ncclReduceScatter(send, mine, static_cast<size_t>(p->chunk), NcclType(op->dtype), ncclSum,
                                        comms_.reduce, reduce_stream_));
    }
    BPS_CUDA_RETURN(cudaEventRecord(p->reduced, reduce_stream_));
    BPS_CUDA_RETURN(cudaStreamWaitEvent(copy_stream_, p->reduced, 0));
    if (slice_bytes > 0) {
      BPS_CUDA_RETURN(cudaMemcpyAsync(p->staging, mine, slice_bytes, cudaMemcpyDeviceToHost, copy_stream_));
    }
    BPS_CUDA_RETURN(cudaEventRecord(p->staged, copy_stream_));
  }
  {
    std::lock_guard<std::mutex> lock(gather_mu_);
    for (auto& p : op->parts) gather_queue_.push_back(p.get());
  }
  {
    std::lock_guard<std::mutex> lock(stage_mu_);
    for (auto& p : op->parts) stage_queue_.push_back(p.get());
  }
  stage_cv_.notify_one();
  return Status::OK();
}

void GpuEngine::OnNetworkDone(void* user, int code, const char* message) {
  auto* p = static_cast<GpuPartition*>(user);
  GpuEngine& self = Get();
  {
    std::lock_guard<std::mutex> lock(self.gather_mu_);
    p->net_code = code;
    if (code != BPS_OK) p->net_error = message ? message : "";
    p->net.store(code == BPS_OK ? 1 : 2, std::memory_order_release);
  }
  self.partitions_networked_++;
  self.gather_cv_.notify_one();
}

void GpuEngine::StagerLoop() {
  cudaSetDevice(device_);
  for (;;) {
    GpuPartition* p = PopWhen(stage_mu_, stage_cv_, stage_queue_);
    GpuOp* op = p->op;
    Status st = WaitForEvent(p->staged, *op, Poll::kLatency);
    if (st.ok()) {
      bps_tensor slice{};
      slice.data = p->staging;
      slice.num_elements = p->chunk;
      slice.dtype = static_cast<int32_t>(op->dtype);
      slice.device = -1;
      // Every machine cuts the tensor the same way, so "<name>#gpu<i>" names
      // the same slice everywhere; the engine keys it by local rank too.
      std::shared_ptr<Engine> engine = ProcessEngine::Get().engine();
      st = engine ? engine->SubmitMachineReduced(slice, p->staging, op->name + "#gpu" + std::to_string(p->index),
                                                 op->priority, op->reduce_op, &GpuEngine::OnNetworkDone, p)
                  : Status(BPS_NOT_INITIALIZED, "byteps was shut down while GPU push_pulls were pending");
    }
    if (!st.ok()) OnNetworkDone(p, st.code(), st.message().c_str());
  }
}

void GpuEngine::GatherLoop() {
  cudaSetDevice(device_);
  for (;;) {
    GpuPartition* p = nullptr;
    {
      std::unique_lock<std::mutex> lock(gather_mu_);
      gather_cv_.wait(lock, [&] {
        return !gather_queue_.empty() && gather_queue_.front()->net.load(std::memory_order_acquire) != 0;
      });
      p = gather_queue_.front();
      gather_queue_.pop_front();
    }
    GpuOp* op = p->op;
    if (p->net.load() == 2 && op->error.ok()) op->error = Status(p->net_code, p->net_error);
    // The all-gather is issued even for a failed partition: every local rank
    // must see the same sequence of collectives on the gather communicator.
    const size_t esz = op->elem_size;
    const size_t slice_bytes = static_cast<size_t>(p->chunk) * esz;
    char* base = p->padded ? p->scratch : op->output + p->offset * esz;
    char* mine = base + local_rank_ * slice_bytes;
    Status st;
    if (is_broken_) {
      std::lock_guard<std::mutex> lock(broken_mu_);
      st = broken_;
    } else if (slice_bytes > 0) {
      st = CudaStatus(cudaMemcpyAsync(mine, p->staging, slice_bytes, cudaMemcpyHostToDevice, gather_stream_),
                      "cudaMemcpyAsync (staging to device)");
      if (st.ok() && local_size_ > 1) {
        st = NcclStatus(ncclAllGather(mine, base, static_cast<size_t>(p->chunk), NcclType(op->dtype), comms_.gather,
                                      gather_stream_),
                        "ncclAllGather");
      }
    }
    if (st.ok() && p->padded) {
      st = CudaStatus(cudaMemcpyAsync(op->output + p->offset * esz, p->scratch, p->count * esz,
                                      cudaMemcpyDeviceToDevice, gather_stream_),
                      "cudaMemcpyAsync (scratch to output)");
      cudaFreeAsync(p->scratch, gather_stream_);
      p->scratch = nullptr;
    }
    if (!st.ok()) {
      Break(st.WithContext("push_pull of '" + op->name + "'"));
      if (op->error.ok()) op->error = st;
    }
    if (p->index + 1 == static_cast<int>(op->parts.size())) {
      Status rec = CudaStatus(cudaEventRecord(op->finished, gather_stream_), "cudaEventRecord");
      if (!rec.ok() && op->error.ok()) op->error = rec;
      {
        std::lock_guard<std::mutex> lock(done_mu_);
        done_queue_.push_back(op);
      }
      done_cv_.notify_one();
    }
  }
}

void GpuEngine::CompletionLoop() {
  cudaSetDevice(device_);
  for (;;) {
    std::unique_ptr<GpuOp> op(PopWhen(done_mu_, done_cv_, done_queue_));
    // One machine: the caller's stream already waits for op->finished; lazy
    // polling suffices only when the caller waits there rather than on done.
    const bool lazy = !distributed_ && op->caller_waits_on_stream;
    Status st = WaitForEvent(op->finished, *op, lazy ? Poll::kLazy : Poll::kLatency);
    if (st.ok() && !op->error.ok()) st = op->error;
    Finish(std::move(op), st);
  }
}

Status GpuEngine::WaitForEvent(cudaEvent_t event, const GpuOp& op, Poll poll) {
  // Never spin on cudaEventQuery: every query takes the driver's context
  // lock, and a tight loop of them slows the framework's kernel launches
  // (backward passes launch thousands). kLatency: a host thread acts on the
  // event (staging to the network, completing a Future), so a few quick
  // polls, then every ~20 us, far below a network round trip. kLazy: the
  // caller's stream is already ordered after the event; only a failure is
  // left to report, so ~1 ms is soon enough.
  const auto pause = poll == Poll::kLazy ? std::chrono::microseconds(1000) : std::chrono::microseconds(20);
  auto last_check = Clock::now();
  for (int spins = 0;; ++spins) {
    cudaError_t err = cudaEventQuery(event);
    if (err == cudaSuccess) return Status::OK();
    if (err != cudaErrorNotReady) return CudaStatus(err, "cudaEventQuery");
    if (is_broken_) {
      std::lock_guard<std::mutex> lock(broken_mu_);
      return broken_;
    }
    if (poll == Poll::kLatency && spins < 8) {
      sched_yield();
      continue;
    }
    std::this_thread::sleep_for(pause);
    auto now = Clock::now();
    if (now - last_check < std::chrono::milliseconds(100)) continue;
    last_check = now;
    ncclResult_t async_a = ncclSuccess, async_b = ncclSuccess;
    if (comms_.reduce) ncclCommGetAsyncError(comms_.reduce, &async_a);
    if (comms_.gather) ncclCommGetAsyncError(comms_.gather, &async_b);
    if (async_a != ncclSuccess && async_a != ncclInProgress) {
      Break(NcclStatus(async_a, "NCCL (reduce communicator)"));
      continue;
    }
    if (async_b != ncclSuccess && async_b != ncclInProgress) {
      Break(NcclStatus(async_b, "NCCL (gather communicator)"));
      continue;
    }
    double waited = std::chrono::duration<double>(now - op.submitted).count();
    if (waited > timeout_seconds_) {
      Break(Status::Timeout("GPU push_pull of '" + op.name + "' made no progress for " +
                            std::to_string(static_cast<int>(waited)) + " s (BYTEPS_TIMEOUT=" +
                            std::to_string(timeout_seconds_) +
                            "): a local rank stopped submitting, or submits GPU tensors in another order"));
    }
  }
}

void GpuEngine::Break(const Status& status) {
  {
    std::lock_guard<std::mutex> lock(broken_mu_);
    if (is_broken_) return;
    broken_ = status;
    is_broken_ = true;
  }
  // Pending and later GPU ops now fail with this status. The communicators
  // are aborted (not destroyed: kernels may wait on a dead peer) only when the
  // engine is initialised again, since other threads may still hold them.
  BPS_LOG(Error) << "GPU path failed: " << status.message();
  // The rank's one failure latch: host push_pulls, the servers (at shutdown)
  // and the other local ranks learn it too, as for any failure of this rank.
  if (std::shared_ptr<Engine> engine = ProcessEngine::Get().engine()) engine->Fail(status);
}

void GpuEngine::Release(GpuOp* op, cudaStream_t free_on) {
  ReturnEvent(op->ready);
  ReturnEvent(op->finished);
  op->ready = op->finished = nullptr;
  for (auto& p : op->parts) {
    ReturnEvent(p->reduced);
    ReturnEvent(p->staged);
    p->reduced = p->staged = nullptr;
    if (p->scratch) cudaFreeAsync(p->scratch, free_on);
    p->scratch = nullptr;
  }
  if (op->staging) staging_.Release(op->staging);
  op->staging = nullptr;
}

void GpuEngine::Finish(std::unique_ptr<GpuOp> op, const Status& status) {
  Release(op.get(), gather_stream_);
  in_flight_--;
  // One machine: the caller's Future completed when the op was queued
  // (stream-ordered), so done() below cannot reach the user. Latch the
  // failure: every later GPU push_pull fails with this cause instead of
  // running on after a result that was never produced (bug 7).
  if (!status.ok() && !distributed_) {
    Break(status.message().find("'" + op->name + "'") == std::string::npos
              ? status.WithContext("stream-ordered push_pull of '" + op->name + "'")
              : status);
  }
  if (status.ok()) {
    ops_completed_++;
    bytes_reduced_ += static_cast<uint64_t>(op->count) * op->elem_size;
    op->done(op->user_data, BPS_OK, "");
  } else {
    std::string msg = status.message();
    if (msg.find("'" + op->name + "'") == std::string::npos) msg = "push_pull of '" + op->name + "' failed: " + msg;
    op->done(op->user_data, status.code(), msg.c_str());
  }
}

cudaEvent_t GpuEngine::TakeEvent() {
  {
    std::lock_guard<std::mutex> lock(events_mu_);
    if (!free_events_.empty()) {
      cudaEvent_t e = free_events_.back();
      free_events_.pop_back();
      return e;
    }
  }
  cudaEvent_t e = nullptr;
  if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) return nullptr;
  return e;
}

void GpuEngine::ReturnEvent(cudaEvent_t event) {
  if (!event) return;
  std::lock_guard<std::mutex> lock(events_mu_);
  free_events_.push_back(event);
}

std::string GpuEngine::StatsJson() {
  std::ostringstream s;
  s << "{\"device\": " << device_ << ", \"ops_completed\": " << ops_completed_.load()
    << ", \"bytes_reduced\": " << bytes_reduced_.load() << ", \"partitions_networked\": "
    << partitions_networked_.load() << ", \"in_flight\": " << in_flight_.load()
    << ", \"pinned_staging_bytes\": " << staging_.allocated_bytes()
    << ", \"pinned_staging_buffers\": " << staging_.buffers() << "}";
  return s.str();
}

Status SubmitOnStream(const bps_tensor& input, void* output, const std::string& name, int32_t priority,
                      int32_t reduce_op, bps_done_fn done, void* user_data, void* stream,
                      bool caller_waits_on_stream) {
  return GpuEngine::Get().Submit(input, output, name, priority, reduce_op, done, user_data,
                                 static_cast<cudaStream_t>(stream), caller_waits_on_stream);
}

std::string StatsJson() { return GpuEngine::Get().StatsJson(); }

std::string BuildInfo() {
  int nccl = 0, runtime = 0, driver = 0;
  ncclGetVersion(&nccl);
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  auto cuda = [](int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); };
  std::ostringstream s;
  s << "cuda: yes (built with " << cuda(CUDART_VERSION) << ", runtime " << cuda(runtime) << ", driver "
    << (driver ? cuda(driver) : std::string("none")) << "); nccl: " << nccl / 10000 << "." << (nccl % 10000) / 100
    << "." << nccl % 100 << " (built with " << NCCL_MAJOR << "." << NCCL_MINOR << "." << NCCL_PATCH << ")";
  return s.str();
}

}  // namespace gpu
}  // namespace bps
