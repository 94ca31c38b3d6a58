// Which host calls stop a waiting kernel from overlapping later copies
// (issue 38: the stream-ordered completion hung on 2 x H200).
//
// For each call X: a one-thread kernel on stream A waits for a word of
// mapped host memory (as csrc/gpu/stream_hold.cu does); the host then calls X
// on another thread and queues a device-to-host copy on stream B (both
// streams non-blocking). If X does not return within a second, X waits for
// the kernel itself; if the copy does not finish within a second, X made
// later work wait for the kernel (CUDA's "implicit synchronization" list).
// Either way a release that needs that copy would never come. The word is
// then released and everything drains.
//
//   nvcc -std=c++17 -O2 benchmarks/stream_hold_probe.cu -o /tmp/stream_hold_probe && /tmp/stream_hold_probe
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

__global__ void WaitForHostWord(const volatile uint32_t* word, uint32_t target) {
  while (static_cast<int32_t>(*word - target) < 0) __nanosleep(256);
}

#define CHECK(call)                                                                          \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

bool WaitUntil(const std::function<bool()>& done, double seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return done();
}

}  // namespace

int main() {
  CHECK(cudaSetDevice(0));
  uint32_t* host_word = nullptr;
  CHECK(cudaHostAlloc(&host_word, sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable));
  uint32_t* device_word = nullptr;
  CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_word), host_word, 0));
  *reinterpret_cast<volatile uint32_t*>(host_word) = 0;
  cudaStream_t a, b;
  CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  const size_t kCopy = 1 << 20;
  void* src = nullptr;
  void* dst = nullptr;
  CHECK(cudaMalloc(&src, kCopy));
  CHECK(cudaHostAlloc(&dst, kCopy, cudaHostAllocPortable));
  cudaEvent_t copied;
  CHECK(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));
  // Memory the calls free, made before the kernel waits.
  std::vector<void*> device_blocks, host_blocks;

  struct Case {
    std::string name;
    std::function<void()> call;
  };
  std::vector<Case> cases = {
      {"nothing", [] {}},
      {"cudaHostAlloc 64 MiB", [] { void* p; CHECK(cudaHostAlloc(&p, 64 << 20, cudaHostAllocPortable)); }},
      {"cudaMallocHost 4 MiB", [] { void* p; CHECK(cudaMallocHost(&p, 4 << 20)); }},
      {"cudaMalloc 64 MiB", [] { void* p; CHECK(cudaMalloc(&p, 64 << 20)); }},
      {"cudaMalloc 2 GiB", [] { void* p; CHECK(cudaMalloc(&p, size_t(2) << 30)); }},
      {"cudaMallocAsync 64 MiB (stream B)", [&] { void* p; CHECK(cudaMallocAsync(&p, 64 << 20, b)); }},
      {"cudaEventCreate", [] { cudaEvent_t e; CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming)); }},
      {"cudaStreamCreate (non-blocking)", [] { cudaStream_t s; CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }},
      {"cudaMemset (sync, device)", [&] { CHECK(cudaMemset(src, 0, 4096)); }},
      {"cudaFree", [&] { void* p = device_blocks.back(); device_blocks.pop_back(); CHECK(cudaFree(p)); }},
      {"cudaFreeHost", [&] { void* p = host_blocks.back(); host_blocks.pop_back(); CHECK(cudaFreeHost(p)); }},
  };
  std::printf("%-36s %-22s %s\n", "host call between", "call returned", "later copy on another stream");
  for (const Case& c : cases) {
    void* d; CHECK(cudaMalloc(&d, 1 << 20)); device_blocks.push_back(d);
    void* h; CHECK(cudaHostAlloc(&h, 1 << 20, cudaHostAllocPortable)); host_blocks.push_back(h);
    CHECK(cudaDeviceSynchronize());
    const uint32_t target = *host_word + 1;
    WaitForHostWord<<<1, 1, 0, a>>>(device_word, target);
    CHECK(cudaGetLastError());
    std::atomic<bool> returned{false};
    std::thread caller([&] {
      CHECK(cudaSetDevice(0));
      c.call();
      CHECK(cudaMemcpyAsync(dst, src, kCopy, cudaMemcpyDeviceToHost, b));
      CHECK(cudaEventRecord(copied, b));
      returned = true;
    });
    const bool call_returned = WaitUntil([&] { return returned.load(); }, 1.0);
    const bool copy_done = call_returned && WaitUntil([&] { return cudaEventQuery(copied) == cudaSuccess; }, 1.0);
    __atomic_store_n(host_word, target, __ATOMIC_SEQ_CST);  // release the kernel
    caller.join();
    CHECK(cudaDeviceSynchronize());
    std::printf("%-36s %-22s %s\n", c.name.c_str(), call_returned ? "at once" : "AFTER THE KERNEL",
                !call_returned ? "-" : copy_done ? "ran beside the kernel" : "WAITED FOR THE KERNEL");
  }
  return 0;
}
