#include "gpu/slice_compression.h"

#include <algorithm>

#include "compression/device_codec.h"
#include "gpu/cuda_status.h"

namespace bps {
namespace gpu {

namespace {

struct DeviceSliceBuffers {
  float* residual = nullptr;
  float* momentum = nullptr;
  uint32_t* cuts = nullptr;
  char* payload = nullptr;
  char* answer = nullptr;
  void* scratch = nullptr;
};

void FreeBuffers(DeviceSliceBuffers* b) {
  for (void* p : {static_cast<void*>(b->residual), static_cast<void*>(b->momentum), static_cast<void*>(b->cuts),
                  static_cast<void*>(b->payload), static_cast<void*>(b->answer), b->scratch}) {
    if (p) cudaFree(p);
  }
  delete b;
}

// The key's buffers, made on its first round: zeroed state, the cuts copied
// in, all queued on `stream` ahead of the round's kernels.
Status BuffersOf(SliceCompression* c, cudaStream_t stream, DeviceSliceBuffers** out) {
  if (c->state) {
    *out = static_cast<DeviceSliceBuffers*>(c->state);
    return Status::OK();
  }
  auto* b = new DeviceSliceBuffers();
  const uint64_t floats = static_cast<uint64_t>(c->push.count) * sizeof(float);
  Status st;
  auto allocate = [&](void** p, uint64_t bytes, const char* what) {
    if (st.ok() && bytes > 0) st = CudaStatus(cudaMalloc(p, bytes), what);
  };
  allocate(reinterpret_cast<void**>(&b->residual), c->error_feedback ? floats : 0, "cudaMalloc (compression residual)");
  allocate(reinterpret_cast<void**>(&b->momentum), c->momentum ? floats : 0, "cudaMalloc (compression momentum)");
  allocate(reinterpret_cast<void**>(&b->cuts), c->cuts.size() * sizeof(uint32_t), "cudaMalloc (onebit cuts)");
  allocate(reinterpret_cast<void**>(&b->payload), CompressedBytes(c->push), "cudaMalloc (compressed payload)");
  allocate(reinterpret_cast<void**>(&b->answer), CompressedBytes(c->answer), "cudaMalloc (compressed answer)");
  allocate(&b->scratch, std::max(DeviceScratchBytes(c->push), DeviceScratchBytes(c->answer)),
           "cudaMalloc (codec scratch)");
  if (st.ok() && b->residual) st = CudaStatus(cudaMemsetAsync(b->residual, 0, floats, stream), "cudaMemsetAsync");
  if (st.ok() && b->momentum) st = CudaStatus(cudaMemsetAsync(b->momentum, 0, floats, stream), "cudaMemsetAsync");
  if (st.ok() && b->cuts) {
    // c->cuts lives as long as c: the pageable source outlives the copy.
    st = CudaStatus(cudaMemcpyAsync(b->cuts, c->cuts.data(), c->cuts.size() * sizeof(uint32_t),
                                    cudaMemcpyHostToDevice, stream),
                    "cudaMemcpyAsync (onebit cuts)");
  }
  if (!st.ok()) {
    FreeBuffers(b);
    return st;
  }
  c->state = b;
  *out = b;
  return Status::OK();
}

}  // namespace

bool DeviceCompressesSlices(const CodecHeader& push) { return FindDeviceCodec(push.kind) != nullptr; }

Status EncodeSliceIntoStaging(SliceCompression* c, int device, const float* slice, uint32_t round, char* staging,
                              cudaStream_t stream) {
  DeviceSliceBuffers* b = nullptr;
  BPS_RETURN_IF_ERROR(BuffersOf(c, stream, &b));
  DeviceSliceState state;
  state.residual = b->residual;
  state.momentum = b->momentum;
  state.mu = c->mu;
  state.nesterov = c->nesterov;
  state.cuts = b->cuts;
  BPS_RETURN_IF_ERROR(DeviceCompress(c->push, slice, state, c->key, round, b->payload, b->scratch, stream)
                          .WithContext("compressing a slice on cuda:" + std::to_string(device)));
  BPS_CUDA_RETURN(cudaMemcpyAsync(staging, b->payload, CompressedBytes(c->push), cudaMemcpyDeviceToHost, stream));
  return Status::OK();
}

Status DecodeStagingIntoSlice(SliceCompression* c, int device, const char* staging, uint32_t round, float* slice,
                              cudaStream_t stream) {
  DeviceSliceBuffers* b = nullptr;
  BPS_RETURN_IF_ERROR(BuffersOf(c, stream, &b));
  BPS_CUDA_RETURN(cudaMemcpyAsync(b->answer, staging, CompressedBytes(c->answer), cudaMemcpyHostToDevice, stream));
  return DeviceDecompress(c->answer, b->answer, c->key, round, slice, b->scratch, stream)
      .WithContext("expanding a compressed answer on cuda:" + std::to_string(device));
}

void ForgetSliceCompression(SliceCompression* c, int device) {
  if (!c->state) return;
  DeviceGuard guard(device);
  FreeBuffers(static_cast<DeviceSliceBuffers*>(c->state));
  c->state = nullptr;
}

}  // namespace gpu
}  // namespace bps
