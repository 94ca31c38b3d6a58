// What the codecs' .cu files share (included by them only: it needs CUDA): grid sizes, CUDA errors as a Status, the sparse codecs' decoding, and
// the exclusive prefix sum (CUB) that turns per-element flags into ascending
// output positions (topk's and randomk's indices come out in index order).
#pragma once
#include <cuda_runtime.h>

#include <cub/device/device_scan.cuh>
#include <string>

#include "common/status.h"
#include "compression/device_codec.h"

namespace bps {
namespace device_launch {

constexpr int kThreads = 256;

inline int Blocks(uint64_t work) {
  const uint64_t wanted = (work + kThreads - 1) / kThreads;
  return static_cast<int>(wanted < 1 ? 1 : wanted > 4096 ? 4096 : wanted);
}

#define BPS_GRID_STRIDE(i, count)                                                                          \
  for (uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < (count); \
       i += uint64_t{blockDim.x} * gridDim.x)

inline Status Check(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::OK();
  return Status::Internal(std::string(what) + " failed on the device: " + cudaGetErrorString(error));
}
// The launches queued so far (a bad configuration shows here; faults in a
// kernel show at the stream's next synchronization).
inline Status Launched(const char* what) { return Check(cudaGetLastError(), what); }

inline uint64_t Align(uint64_t bytes) { return (bytes + 255) / 256 * 256; }

// CUB's scratch for an exclusive sum of n uint32.
inline uint64_t ScanScratchBytes(uint32_t n) {
  size_t bytes = 0;
  cub::DeviceScan::ExclusiveSum(nullptr, bytes, static_cast<const uint32_t*>(nullptr),
                                static_cast<uint32_t*>(nullptr), static_cast<int>(n));
  return Align(bytes);
}
inline Status ExclusiveSum(const uint32_t* in, uint32_t* out, uint32_t n, void* scratch, cudaStream_t stream) {
  size_t bytes = ScanScratchBytes(n);
  return Check(cub::DeviceScan::ExclusiveSum(scratch, bytes, in, out, static_cast<int>(n), stream),
               "exclusive sum");
}

// Scratch handed out in 256-byte aligned pieces.
class ScratchCursor {
 public:
  explicit ScratchCursor(void* base) : next_(static_cast<char*>(base)) {}
  template <typename T>
  T* Take(uint64_t count) {
    T* p = reinterpret_cast<T*>(next_);
    next_ += Align(count * sizeof(T));
    return p;
  }

 private:
  char* next_;
};

}  // namespace device_launch

// A sparse codec (topk, randomk): decoding is zeros, then DecodeAdd. In this
// CUDA-only header, not in DeviceCodec itself, so that builds without CUDA
// keep DeviceCodec's vtable and typeinfo free of CUDA code.
class SparseDeviceCodec : public DeviceCodec {
 public:
  Status Decode(const CodecHeader& h, const uint32_t* cuts, const char* body, uint64_t key, uint32_t round,
                float* out, void* scratch, void* stream) const override {
    BPS_RETURN_IF_ERROR(device_launch::Check(
        cudaMemsetAsync(out, 0, uint64_t{h.count} * sizeof(float), static_cast<cudaStream_t>(stream)),
        "the decoded slice's zeros"));
    return DecodeAdd(h, cuts, body, key, round, out, scratch, stream);
  }
};

}  // namespace bps
