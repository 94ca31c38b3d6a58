// How fast partitions leave and reach the GPU with the device path's
// pattern of CUDA calls, and what each call of that pattern costs (issue 38:
// a machine pushing from the GPU moves 16-18 ms per 256 MiB less than one
// pushing from host memory, at 10 and 25 Gbit/s, with 1 or 4 MB partitions).
//
// 256 MiB in chunks of 1 and 4 MiB, between device memory and pinned host
// memory (cudaHostAllocPortable, as gpu/pinned_staging.cc), on non-blocking
// streams of the greatest priority (as gpu/nccl_collectives.cc). Patterns:
//   one       a single 256 MiB copy: the link's peak
//   plain     one cudaMemcpyAsync per chunk
//   event     + cudaEventRecord after each
//   hostfunc  + cudaLaunchHostFunc after each (a futex wake, as the engine's
//             doorbell): the device path today
//   engine    the reduce-scatter side as After() queues it: an event on a
//             second stream, waited for on the copy stream, copy, event,
//             host function
//   notify    the host function on a third stream, behind the copy's event
//   pageable  plain, into malloc'd memory (cudaMemcpyAsync is synchronous)
//   duplex    d2h and h2d at once on two streams, each with hostfunc
// For each: the host's time to queue the calls, and the time until the
// stream finished (GB/s). A queueing time near the total says a call blocked.
//
// On an H200 (2026-11-29, benchmarks/results/issue38/call29): 1 MiB chunks
// copy at 49.5 GB/s plain or with events, 16 GB/s with a host function after
// each (queueing 13 ms of the 16.7, 11.5 ms of it in cudaMemcpyAsync), and
// 46 GB/s with the host functions on a third stream. Hence the engine's
// bounded copy-ahead (Config::device_copy_ahead_bytes).
//
//   nvcc -std=c++17 -O2 benchmarks/gpu_copy_pipeline_probe.cu -o /tmp/gcp && /tmp/gcp
#include <cuda_runtime.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

#define CHECK(x)                                                                           \
  do {                                                                                     \
    cudaError_t check_error_ = (x);                                                        \
    if (check_error_ != cudaSuccess) {                                                     \
      std::fprintf(stderr, "%s: %s (line %d)\n", #x, cudaGetErrorString(check_error_), __LINE__); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

std::atomic<uint32_t> doorbell{0};

void CUDART_CB Ring(void*) {
  doorbell.fetch_add(1, std::memory_order_release);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&doorbell), FUTEX_WAKE_PRIVATE, 1 << 30, nullptr, nullptr, 0);
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

constexpr size_t kTotal = size_t(256) << 20;

struct Bench {
  char* dev = nullptr;
  char* dev2 = nullptr;
  char* pinned = nullptr;
  char* pinned2 = nullptr;
  char* pageable = nullptr;
  cudaStream_t a = nullptr, b = nullptr, c = nullptr;
  std::vector<cudaEvent_t> events;

  cudaEvent_t Event(size_t i) {
    while (events.size() <= i) {
      cudaEvent_t e;
      CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      events.push_back(e);
    }
    return events[i];
  }

  void Report(const char* what, const char* dir, size_t chunk, double t0, double issued, double done, double bytes) {
    std::printf("%-9s %-6s chunk %4zu KiB  queue %7.2f ms  total %7.2f ms  %6.1f GB/s\n", what, dir, chunk >> 10,
                (issued - t0) * 1e3, (done - t0) * 1e3, bytes / (done - t0) / 1e9);
    std::fflush(stdout);
  }

  void Copy(bool d2h, size_t off, size_t n, cudaStream_t s) {
    if (d2h) {
      CHECK(cudaMemcpyAsync(pinned + off, dev + off, n, cudaMemcpyDeviceToHost, s));
    } else {
      CHECK(cudaMemcpyAsync(dev2 + off, pinned2 + off, n, cudaMemcpyHostToDevice, s));
    }
  }

  void Run(const std::string& pattern, bool d2h, size_t chunk) {
    CHECK(cudaDeviceSynchronize());
    const size_t chunks = kTotal / chunk;
    const double t0 = Now();
    if (pattern == "one") {
      Copy(d2h, 0, kTotal, b);
    } else if (pattern == "duplex") {
      for (size_t i = 0; i < chunks; ++i) {
        Copy(true, i * chunk, chunk, b);
        CHECK(cudaEventRecord(Event(2 * i), b));
        CHECK(cudaLaunchHostFunc(b, &Ring, nullptr));
        Copy(false, i * chunk, chunk, c);
        CHECK(cudaEventRecord(Event(2 * i + 1), c));
        CHECK(cudaLaunchHostFunc(c, &Ring, nullptr));
      }
    } else if (pattern == "engine") {
      // After()'s calls in its order, each kind timed on the host.
      double t_wait = 0, t_record = 0, t_copy = 0, t_host = 0;
      for (size_t i = 0; i < chunks; ++i) {
        double c0 = Now();
        CHECK(cudaEventRecord(Event(2 * i), a));
        double c1 = Now();
        CHECK(cudaStreamWaitEvent(b, Event(2 * i), 0));
        double c2 = Now();
        Copy(d2h, i * chunk, chunk, b);
        double c3 = Now();
        CHECK(cudaEventRecord(Event(2 * i + 1), b));
        double c4 = Now();
        CHECK(cudaLaunchHostFunc(b, &Ring, nullptr));
        double c5 = Now();
        t_record += (c1 - c0) + (c4 - c3);
        t_wait += c2 - c1;
        t_copy += c3 - c2;
        t_host += c5 - c4;
      }
      std::printf("  engine's calls (ms in all): cudaEventRecord %.2f  cudaStreamWaitEvent %.2f  cudaMemcpyAsync %.2f  "
                  "cudaLaunchHostFunc %.2f\n", t_record * 1e3, t_wait * 1e3, t_copy * 1e3, t_host * 1e3);
    } else if (pattern == "notify") {
      // Host functions on a stream of their own, behind an event: the copy
      // stream never waits for the callback thread.
      for (size_t i = 0; i < chunks; ++i) {
        Copy(d2h, i * chunk, chunk, b);
        CHECK(cudaEventRecord(Event(2 * i + 1), b));
        CHECK(cudaStreamWaitEvent(c, Event(2 * i + 1), 0));
        CHECK(cudaLaunchHostFunc(c, &Ring, nullptr));
      }
    } else if (pattern == "pageable") {
      for (size_t i = 0; i < chunks; ++i) {
        CHECK(cudaMemcpyAsync(pageable + i * chunk, dev + i * chunk, chunk, cudaMemcpyDeviceToHost, b));
      }
    } else {
      for (size_t i = 0; i < chunks; ++i) {
        Copy(d2h, i * chunk, chunk, b);
        if (pattern != "plain") CHECK(cudaEventRecord(Event(2 * i + 1), b));
        if (pattern == "hostfunc") CHECK(cudaLaunchHostFunc(b, &Ring, nullptr));
      }
    }
    const double issued = Now();
    CHECK(cudaStreamSynchronize(b));
    CHECK(cudaStreamSynchronize(c));
    const double done = Now();
    Report(pattern.c_str(), pattern == "duplex" ? "both" : d2h ? "d2h" : "h2d", pattern == "one" ? kTotal : chunk, t0,
           issued, done, pattern == "duplex" ? 2.0 * kTotal : double(kTotal));
  }

  // The cost of one call, alone, averaged over 2000.
  void CallCosts() {
    const int n = 2000;
    double t0 = Now();
    for (int i = 0; i < n; ++i) CHECK(cudaEventRecord(Event(i % 64), b));
    double t1 = Now();
    CHECK(cudaStreamSynchronize(b));
    for (int i = 0; i < n; ++i) (void)cudaEventQuery(Event(i % 64));
    double t2 = Now();
    for (int i = 0; i < n; ++i) CHECK(cudaLaunchHostFunc(b, &Ring, nullptr));
    double t3 = Now();
    CHECK(cudaStreamSynchronize(b));
    double t4 = Now();
    for (int i = 0; i < n; ++i) CHECK(cudaStreamWaitEvent(b, Event(i % 64), 0));
    double t5 = Now();
    CHECK(cudaStreamSynchronize(b));
    int device = 0;
    double t6 = Now();
    for (int i = 0; i < n; ++i) CHECK(cudaSetDevice(device));
    double t7 = Now();
    std::printf("per call (us): cudaEventRecord %.2f  cudaEventQuery %.2f  cudaLaunchHostFunc %.2f  "
                "(%d host functions run back to back in %.2f ms: %.1f us each)  cudaStreamWaitEvent %.2f  "
                "cudaSetDevice %.2f\n",
                (t1 - t0) / n * 1e6, (t2 - t1) / n * 1e6, (t3 - t2) / n * 1e6, n, (t4 - t2) * 1e3,
                (t4 - t2) / n * 1e6, (t5 - t4) / n * 1e6, (t7 - t6) / n * 1e6);
  }
};

}  // namespace

int main() {
  Bench b;
  CHECK(cudaSetDevice(0));
  CHECK(cudaMalloc(&b.dev, kTotal));
  CHECK(cudaMalloc(&b.dev2, kTotal));
  CHECK(cudaMemset(b.dev, 1, kTotal));
  CHECK(cudaHostAlloc(reinterpret_cast<void**>(&b.pinned), kTotal, cudaHostAllocPortable));
  CHECK(cudaHostAlloc(reinterpret_cast<void**>(&b.pinned2), kTotal, cudaHostAllocPortable));
  b.pageable = static_cast<char*>(std::malloc(kTotal));
  for (size_t i = 0; i < kTotal; i += 4096) b.pageable[i] = 0;
  int least = 0, greatest = 0;
  CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  CHECK(cudaStreamCreateWithPriority(&b.a, cudaStreamNonBlocking, greatest));
  CHECK(cudaStreamCreateWithPriority(&b.b, cudaStreamNonBlocking, greatest));
  CHECK(cudaStreamCreateWithPriority(&b.c, cudaStreamNonBlocking, greatest));
  b.Run("one", true, kTotal);  // warm-up
  b.CallCosts();
  for (int rep = 0; rep < 2; ++rep) {
    for (size_t chunk : {size_t(1) << 20, size_t(4) << 20}) {
      for (bool d2h : {true, false}) {
        for (const char* p : {"one", "plain", "event", "hostfunc", "engine", "notify", "pageable"}) {
          if (std::string(p) == "one" && chunk != (size_t(1) << 20)) continue;
          if ((std::string(p) == "engine" || std::string(p) == "pageable") && !d2h) continue;
          b.Run(p, d2h, chunk);
        }
      }
      b.Run("duplex", true, chunk);
    }
  }
  std::printf("host functions run: %u\n", doorbell.load());
  return 0;
}
