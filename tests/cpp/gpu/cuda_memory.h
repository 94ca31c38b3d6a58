// DeviceMemory on real GPUs (tests/cpp/device_memory.h): job rank r on
// cuda:r, so the local ranks of every machine are on distinct devices.
#pragma once
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>
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
  void* ResultStream(int device) override {
    std::lock_guard<std::mutex> lock(mu_);
    cudaStream_t& s = streams_[device];
    if (!s) {
      CheckCuda(cudaSetDevice(device), "cudaSetDevice");
      CheckCuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    }
    return s;
  }
  bool ResultStreamsDrained(double seconds) override {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& entry : streams_) {
      cudaSetDevice(entry.first);
      while (cudaStreamQuery(entry.second) == cudaErrorNotReady) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    return true;
  }

 private:
  std::mutex mu_;
  std::map<int, cudaStream_t> streams_;  // never destroyed: a test process's few
};

}  // namespace testing_support
}  // namespace bps
