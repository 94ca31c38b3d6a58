#include "gpu/nccl_collectives.h"

#include <cstdlib>
#include <cstring>
#include <sstream>

#include "common/logging.h"
#include "gpu/cuda_status.h"
#include "gpu/device_scale.h"
#include "gpu/local_communicators.h"
#include "gpu/slice_compression.h"
#include "gpu/stream_hold.h"
#include "local/sequenced_reducer.h"

namespace bps {
namespace gpu {
namespace {

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

uint16_t HalfBits(float f) {
  // 1/N for N >= 1: a normal half (or zero for N > 65504, not a job size).
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (exp <= 0) return static_cast<uint16_t>(sign);
  uint32_t h = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  if (mant & 0x1000) h++;  // round to nearest
  return static_cast<uint16_t>(h);
}

uint16_t BFloat16Bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  x += 0x7fff + ((x >> 16) & 1);  // round to nearest even
  return static_cast<uint16_t>(x >> 16);
}

struct RegisterNccl {
  RegisterNccl() { SetDeviceReducerFactory(&MakeNcclLocalReducer); }
} register_nccl;

}  // namespace

// One partition round's device state.
struct NcclCollectives::WorkState {
  cudaEvent_t reduced = nullptr;   // the reduce-scatter finished (nccl stream)
  cudaEvent_t staged = nullptr;    // the slice is in host staging (d2h stream)
  cudaEvent_t uploaded = nullptr;  // the answer is back in the slice (h2d stream)
  cudaEvent_t gathered = nullptr;  // the output is final (nccl stream)
  char* scratch = nullptr;         // local_size * slice elements when the partition is padded
  char* base = nullptr;            // where the slices lie: the output's partition, or scratch
  char* mine = nullptr;            // this rank's slice in base
};

Status NcclCollectives::Create(const Config& config, Store* store, int device, std::function<void()> ring,
                               std::unique_ptr<Collectives>* out) {
  int count = 0;
  BPS_CUDA_RETURN(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count) {
    return Status::Invalid("tensor is on cuda:" + std::to_string(device) + " but this process sees " +
                           std::to_string(count) + " GPUs");
  }
  std::unique_ptr<NcclCollectives> c(new NcclCollectives());
  c->device_ = device;
  c->local_rank_ = config.local_rank;
  c->local_size_ = config.local_size;
  c->ring_ = std::move(ring);
  DeviceGuard guard(device);
  // Communication outranks compute: a gradient bucket's collective should
  // not queue behind the backward kernels it overlaps with.
  int least = 0, greatest = 0;
  BPS_CUDA_RETURN(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  const char* high = getenv("BYTEPS_GPU_HIGH_PRIORITY_STREAMS");  // default 1; 0: normal priority
  if (high && std::string(high) == "0") greatest = least;
  BPS_CUDA_RETURN(cudaStreamCreateWithPriority(&c->nccl_stream_, cudaStreamNonBlocking, greatest));
  BPS_CUDA_RETURN(cudaStreamCreateWithPriority(&c->d2h_stream_, cudaStreamNonBlocking, greatest));
  BPS_CUDA_RETURN(cudaStreamCreateWithPriority(&c->h2d_stream_, cudaStreamNonBlocking, greatest));
  // One local rank needs no communicator: its "reduce-scatter" is a copy.
  // (NCCL 2.28.9's one-rank reduce-scatter and all-reduce with an average
  // left the last element of odd sizes unwritten: 300001 float32 on 2 x 1.)
  if (c->local_size_ > 1) {
    BPS_RETURN_IF_ERROR(CreateLocalCommunicator(*store, config, &c->comm_));
    BPS_RETURN_IF_ERROR(c->ConnectPeers());
  }
  *out = std::move(c);
  return Status::OK();
}

NcclCollectives::~NcclCollectives() {
  ReleaseOpenHolds();
  DeviceGuard guard(device_);
  // Local and immediate (no peer needed); a clean job has nothing in flight.
  if (comm_ && !aborted_.exchange(true)) ncclCommAbort(comm_);
  comm_ = nullptr;
  // Host functions queued on the streams call back into this object.
  for (cudaStream_t s : {nccl_stream_, d2h_stream_, h2d_stream_}) {
    if (s) {
      cudaStreamSynchronize(s);
      cudaStreamDestroy(s);
    }
  }
  for (cudaEvent_t e : all_events_) cudaEventDestroy(e);
}

// NCCL connects its peers lazily, inside the first collective's
// ncclGroupEnd, which then blocks the calling thread until every peer issued
// it: a local rank that died before its first collective would hold the
// engine thread (and the watchdog on it) inside NCCL. Every local rank is in
// this set-up anyway: connect the reduce-scatter, all-gather and all-reduce
// paths now, with one element per rank.
Status NcclCollectives::ConnectPeers() {
  void* buffer = nullptr;
  BPS_CUDA_RETURN(cudaMalloc(&buffer, sizeof(float) * local_size_));
  float* all = static_cast<float*>(buffer);
  Status st;
  if (ncclReduceScatter(all, all + local_rank_, 1, ncclFloat32, ncclSum, comm_, nccl_stream_) != ncclSuccess ||
      ncclAllGather(all + local_rank_, all, 1, ncclFloat32, comm_, nccl_stream_) != ncclSuccess ||
      ncclAllReduce(all, all, local_size_, ncclFloat32, ncclSum, comm_, nccl_stream_) != ncclSuccess) {
    st = Status::Internal("NCCL's first collectives among the local ranks failed");
  } else {
    st = CudaStatus(cudaStreamSynchronize(nccl_stream_), "connecting the local ranks (cudaStreamSynchronize)");
  }
  cudaFree(buffer);
  return st;
}

void CUDART_CB NcclCollectives::RingFromStream(void* self) {
  // A CUDA host function may not call CUDA: ringing is a futex wake.
  static_cast<NcclCollectives*>(self)->ring_();
}

cudaEvent_t NcclCollectives::TakeEvent() {
  std::lock_guard<std::mutex> lock(events_mu_);
  if (!free_events_.empty()) {
    cudaEvent_t e = free_events_.back();
    free_events_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) return nullptr;
  all_events_.push_back(e);
  return e;
}

void NcclCollectives::ReturnEvent(cudaEvent_t e) {
  if (!e) return;
  std::lock_guard<std::mutex> lock(events_mu_);
  free_events_.push_back(e);
}

Status NcclCollectives::RecordReady(void* stream, void** event) {
  DeviceGuard guard(device_);
  cudaEvent_t e = TakeEvent();
  if (!e) return Status::Internal("cudaEventCreate failed");
  Status st = CudaStatus(cudaEventRecord(e, static_cast<cudaStream_t>(stream)), "cudaEventRecord (caller's stream)");
  if (!st.ok()) {
    ReturnEvent(e);
    return st;
  }
  *event = e;
  return Status::OK();
}

void NcclCollectives::ReturnReady(void* event) { ReturnEvent(static_cast<cudaEvent_t>(event)); }

Status NcclCollectives::HoldStream(void* stream, void** hold) {
  DeviceGuard guard(device_);
  BPS_RETURN_IF_ERROR(StreamHolds::Get().Hold(static_cast<cudaStream_t>(stream), hold));
  std::lock_guard<std::mutex> lock(holds_mu_);
  open_holds_.insert(*hold);
  return Status::OK();
}

void NcclCollectives::ReleaseHold(void* hold) {
  {
    std::lock_guard<std::mutex> lock(holds_mu_);
    if (open_holds_.erase(hold) == 0) return;  // released already (Abort)
  }
  StreamHolds::Get().Release(hold);
}

void NcclCollectives::ReleaseOpenHolds() {
  std::set<void*> open;
  {
    std::lock_guard<std::mutex> lock(holds_mu_);
    open.swap(open_holds_);
  }
  for (void* hold : open) StreamHolds::Get().Release(hold);
}

bool NcclCollectives::CompressesSlices(const CodecHeader& push) const { return DeviceCompressesSlices(push); }

void NcclCollectives::ForgetCompression(SliceCompression* c) { ForgetSliceCompression(c, device_); }

bool NcclCollectives::ScalesAverage(DataType dtype) const {
  // Integers divide the total on the host (truncation, as everywhere); so
  // does float64. One local rank divides with its own kernel (device_scale.h).
  return dtype == DataType::kFloat32 || dtype == DataType::kFloat16 || dtype == DataType::kBFloat16;
}

ncclRedOp_t NcclCollectives::ReduceOpFor(DataType dtype, int64_t divisor) {
  if (divisor <= 1 || !ScalesAverage(dtype)) return ncclSum;
  auto key = std::make_pair(static_cast<int>(dtype), divisor);
  auto it = premul_ops_.find(key);
  if (it != premul_ops_.end()) return it->second;
  const float scale = 1.0f / static_cast<float>(divisor);
  ncclRedOp_t op = ncclSum;
  uint16_t bits = 0;
  const void* scalar = &scale;
  if (dtype == DataType::kFloat16) {
    bits = HalfBits(scale);
    scalar = &bits;
  } else if (dtype == DataType::kBFloat16) {
    bits = BFloat16Bits(scale);
    scalar = &bits;
  }
  if (ncclRedOpCreatePreMulSum(&op, const_cast<void*>(scalar), NcclType(dtype), ncclScalarHostImmediate, comm_) !=
      ncclSuccess) {
    op = ncclSum;  // unreachable for these types; the host then divides nothing: keep it loud
    BPS_LOG(Error) << "ncclRedOpCreatePreMulSum failed for " << DataTypeName(dtype);
  }
  premul_ops_[key] = op;
  return op;
}

NcclCollectives::WorkState* NcclCollectives::StateOf(CollectiveWork* w) {
  if (!w->state) {
    auto* s = new WorkState();
    s->reduced = TakeEvent();
    s->staged = TakeEvent();
    s->uploaded = TakeEvent();
    s->gathered = TakeEvent();
    w->state = s;
  }
  return static_cast<WorkState*>(w->state);
}

void NcclCollectives::BeginBatch() { batch_.clear(); }

Status NcclCollectives::ReduceScatter(CollectiveWork* w) {
  batch_.push_back(Queued{w, false});
  return Status::OK();
}

Status NcclCollectives::AllGather(CollectiveWork* w) {
  batch_.push_back(Queued{w, true});
  return Status::OK();
}

Status NcclCollectives::EndBatch() {
  // CUDA calls between ncclGroupStart and ncclGroupEnd would run before the
  // group's kernels: what precedes each collective is queued before the
  // group, what follows it after.
  if (batch_.empty() || aborted_) return Status::OK();
  DeviceGuard guard(device_);
  for (const Queued& q : batch_) BPS_RETURN_IF_ERROR(Before(q));
  const bool group = local_size_ > 1;
  if (group) BPS_NCCL_RETURN(ncclGroupStart());
  Status launched;
  for (const Queued& q : batch_) {
    launched = Launch(q);
    if (!launched.ok()) break;
  }
  if (group) BPS_NCCL_RETURN(ncclGroupEnd());
  BPS_RETURN_IF_ERROR(launched);
  for (const Queued& q : batch_) BPS_RETURN_IF_ERROR(After(q));
  batch_.clear();
  return Status::OK();
}

Status NcclCollectives::Before(const Queued& q) {
  CollectiveWork* w = q.work;
  WorkState* s = StateOf(w);
  if (!s->reduced || !s->staged || !s->uploaded || !s->gathered) return Status::Internal("cudaEventCreate failed");
  const size_t esz = DataTypeSize(w->dtype);
  const size_t slice_bytes = static_cast<size_t>(w->slice) * esz;
  if (q.gather) {
    // After this rank's answer is back in its slice.
    BPS_CUDA_RETURN(cudaStreamWaitEvent(nccl_stream_, s->uploaded, 0));
    return Status::OK();
  }
  if (w->ready_event) BPS_CUDA_RETURN(cudaStreamWaitEvent(nccl_stream_, static_cast<cudaEvent_t>(w->ready_event), 0));
  s->base = w->output;
  if (w->slice * local_size_ != w->count) {
    // NCCL's slices are equal: reduce a copy padded to local_size * slice
    // elements (stream-ordered memory: no device synchronisation).
    void* scratch = nullptr;
    BPS_CUDA_RETURN(cudaMallocAsync(&scratch, slice_bytes * local_size_, nccl_stream_));
    s->scratch = static_cast<char*>(scratch);
    if (w->count > 0) {
      BPS_CUDA_RETURN(cudaMemcpyAsync(s->scratch, w->input, w->count * esz, cudaMemcpyDeviceToDevice, nccl_stream_));
    }
    s->base = s->scratch;
  }
  s->mine = s->base + local_rank_ * slice_bytes;
  return Status::OK();
}

Status NcclCollectives::Launch(const Queued& q) {
  CollectiveWork* w = q.work;
  WorkState* s = StateOf(w);
  if (w->slice == 0) return Status::OK();
  const ncclDataType_t type = NcclType(w->dtype);
  if (q.gather) {
    if (local_size_ == 1) return Status::OK();  // the slice is the output
    BPS_NCCL_RETURN(ncclAllGather(s->mine, s->base, static_cast<size_t>(w->slice), type, comm_, nccl_stream_));
    return Status::OK();
  }
  const char* send = s->scratch ? s->scratch : w->input;
  if (local_size_ == 1) {
    // Alone on the machine: the slice is the partition (no group: L == 1),
    // divided for an average on the device as NCCL's pre-multiplied sum is.
    if (send != s->mine) {
      BPS_CUDA_RETURN(cudaMemcpyAsync(s->mine, send, w->count * DataTypeSize(w->dtype), cudaMemcpyDeviceToDevice,
                                      nccl_stream_));
    }
    if (w->divisor > 1 && ScalesAverage(w->dtype)) {
      const int code = w->dtype == DataType::kFloat32 ? 0 : w->dtype == DataType::kFloat16 ? 1 : 2;
      BPS_CUDA_RETURN(static_cast<cudaError_t>(bps_divide_on_device(s->mine, w->count, code, w->divisor, nccl_stream_)));
    }
    return Status::OK();
  }
  BPS_NCCL_RETURN(ncclReduceScatter(send, s->mine, static_cast<size_t>(w->slice), type,
                                    ReduceOpFor(w->dtype, w->divisor), comm_, nccl_stream_));
  return Status::OK();
}

Status NcclCollectives::After(const Queued& q) {
  CollectiveWork* w = q.work;
  WorkState* s = StateOf(w);
  const size_t esz = DataTypeSize(w->dtype);
  if (q.gather) {
    if (s->scratch) {
      if (w->count > 0) {
        BPS_CUDA_RETURN(cudaMemcpyAsync(w->output, s->scratch, w->count * esz, cudaMemcpyDeviceToDevice, nccl_stream_));
      }
      BPS_CUDA_RETURN(cudaFreeAsync(s->scratch, nccl_stream_));
      s->scratch = nullptr;
    }
    BPS_CUDA_RETURN(cudaEventRecord(s->gathered, nccl_stream_));
    BPS_CUDA_RETURN(cudaLaunchHostFunc(nccl_stream_, &NcclCollectives::RingFromStream, this));
    return Status::OK();
  }
  BPS_CUDA_RETURN(cudaEventRecord(s->reduced, nccl_stream_));
  BPS_CUDA_RETURN(cudaStreamWaitEvent(d2h_stream_, s->reduced, 0));
  if (w->own_count > 0 && w->compression) {
    // Only the payload crosses to the host (issue 39).
    BPS_RETURN_IF_ERROR(EncodeSliceIntoStaging(w->compression, device_, reinterpret_cast<const float*>(s->mine),
                                               w->round, w->staging, d2h_stream_));
  } else if (w->own_count > 0) {
    BPS_CUDA_RETURN(
        cudaMemcpyAsync(w->staging, s->mine, w->own_count * esz, cudaMemcpyDeviceToHost, d2h_stream_));
  }
  BPS_CUDA_RETURN(cudaEventRecord(s->staged, d2h_stream_));
  BPS_CUDA_RETURN(cudaLaunchHostFunc(d2h_stream_, &NcclCollectives::RingFromStream, this));
  return Status::OK();
}

Status NcclCollectives::Upload(CollectiveWork* w) {
  DeviceGuard guard(device_);
  WorkState* s = StateOf(w);
  const size_t esz = DataTypeSize(w->dtype);
  if (w->own_count > 0 && w->compression) {
    BPS_RETURN_IF_ERROR(DecodeStagingIntoSlice(w->compression, device_, w->staging, w->round,
                                               reinterpret_cast<float*>(s->mine), h2d_stream_));
  } else if (w->own_count > 0) {
    BPS_CUDA_RETURN(cudaMemcpyAsync(s->mine, w->staging, w->own_count * esz, cudaMemcpyHostToDevice, h2d_stream_));
  }
  BPS_CUDA_RETURN(cudaEventRecord(s->uploaded, h2d_stream_));
  return Status::OK();
}

Status NcclCollectives::AllReduce(CollectiveWork* w, void* stream) {
  if (aborted_) return Status::PeerFailure("the machine's NCCL communicator was aborted after a failure");
  DeviceGuard guard(device_);
  WorkState* s = StateOf(w);
  if (!s->gathered) return Status::Internal("cudaEventCreate failed");
  if (w->ready_event) BPS_CUDA_RETURN(cudaStreamWaitEvent(nccl_stream_, static_cast<cudaEvent_t>(w->ready_event), 0));
  const size_t esz = DataTypeSize(w->dtype);
  if (local_size_ == 1) {
    // Alone on the machine: the sum (and the average) is the input.
    if (w->count > 0 && w->output != w->input) {
      BPS_CUDA_RETURN(cudaMemcpyAsync(w->output, w->input, w->count * esz, cudaMemcpyDeviceToDevice, nccl_stream_));
    }
  } else if (w->count > 0) {
    const ncclRedOp_t op = w->divisor > 1 ? ncclAvg : ncclSum;
    BPS_NCCL_RETURN(ncclAllReduce(w->input, w->output, static_cast<size_t>(w->count), NcclType(w->dtype), op, comm_,
                                  nccl_stream_));
  }
  BPS_CUDA_RETURN(cudaEventRecord(s->gathered, nccl_stream_));
  BPS_CUDA_RETURN(cudaLaunchHostFunc(nccl_stream_, &NcclCollectives::RingFromStream, this));
  // Stream-ordered completion: what the caller queues next sees the result.
  BPS_CUDA_RETURN(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), s->gathered, 0));
  return Status::OK();
}

Status NcclCollectives::Poll(CollectiveWork* w, CollectivePhase phase, bool* done) {
  *done = false;
  if (!w->state) return Status::OK();
  WorkState* s = static_cast<WorkState*>(w->state);
  cudaError_t err = cudaEventQuery(phase == CollectivePhase::kReduced ? s->staged : s->gathered);
  if (err == cudaSuccess) {
    *done = true;
    return Status::OK();
  }
  if (err == cudaErrorNotReady) return Status::OK();
  return CudaStatus(err, "cudaEventQuery");
}

void NcclCollectives::Retire(CollectiveWork* w) {
  if (!w->state) return;
  auto* s = static_cast<WorkState*>(w->state);
  if (s->scratch) {
    DeviceGuard guard(device_);
    cudaFreeAsync(s->scratch, nccl_stream_);
  }
  ReturnEvent(s->reduced);
  ReturnEvent(s->staged);
  ReturnEvent(s->uploaded);
  ReturnEvent(s->gathered);
  delete s;
  w->state = nullptr;
}

Status NcclCollectives::CheckAsync() {
  if (!comm_ || aborted_) return Status::OK();
  ncclResult_t async = ncclSuccess;
  ncclCommGetAsyncError(comm_, &async);
  if (async == ncclSuccess || async == ncclInProgress) return Status::OK();
  return NcclStatus(async, "NCCL (the machine's communicator)");
}

void NcclCollectives::Abort() {
  // Callers' streams waiting for results of a failed engine go on (with
  // whatever the buffers hold); the failure reaches the caller through the
  // engine's latch.
  ReleaseOpenHolds();
  if (aborted_.exchange(true)) return;
  DeviceGuard guard(device_);
  BPS_LOG(Warning) << "aborting the machine's NCCL communicator on cuda:" << device_
                   << " so no kernel waits for a failed peer";
  if (comm_) ncclCommAbort(comm_);
  comm_ = nullptr;
}

Status MakeNcclLocalReducer(const Config& config, Store* store, int device, const MachineLink& link,
                            DeviceReducer* out) {
  std::unique_ptr<Collectives> nccl;
  BPS_RETURN_IF_ERROR(NcclCollectives::Create(config, store, device, link.ring_self, &nccl));
  return MakeSequencedReducer(config, std::move(nccl), link, out);
}

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
