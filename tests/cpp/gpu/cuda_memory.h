// DeviceMemory on real GPUs (tests/cpp/device_memory.h): job rank r on
// cuda:r, so the local ranks of every machine are on distinct devices.
#pragma once
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "device_memory.h"

namespace bps {
namespace testing_support {

inline void CheckCuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::abort();
  }
}

inline int CudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

class CudaMemory : public DeviceMemory {
 public:
  int DeviceOf(int rank) const override { return rank; }
  void* Alloc(int device, size_t bytes) override {
    CheckCuda(cudaSetDevice(device), "cudaSetDevice");
    void* p = nullptr;
    CheckCuda(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc");
    CheckCuda(cudaMemset(p, 0xff, bytes), "cudaMemset");  // garbage, not zeros, until written
    return p;
  }
  void Free(int device, void* p) override {
    cudaSetDevice(device);
    cudaFree(p);
  }
  void Upload(int device, void* dst, const void* src, size_t bytes) override {
    CheckCuda(cudaSetDevice(device), "cudaSetDevice");
    CheckCuda(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the device");
  }
  void Download(int device, void* dst, const void* src, size_t bytes) override {
    CheckCuda(cudaSetDevice(device), "cudaSetDevice");
    CheckCuda(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to the host");
  }
};

}  // namespace testing_support
}  // namespace bps
