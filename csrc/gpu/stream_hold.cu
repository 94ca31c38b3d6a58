// The kernel of stream_hold.h: one thread that polls a word of host memory
// over PCIe. A few hundred nanoseconds between reads keep the bus quiet and
// cost the release a fraction of a microsecond.
#include <cuda_runtime.h>

#include "gpu/stream_hold.h"

namespace {

__global__ void WaitForHostWord(const volatile uint32_t* word, uint32_t target) {
  while (static_cast<int32_t>(*word - target) < 0) __nanosleep(256);
  // What the host made complete before its release (the engine's copies and
  // collectives) is visible to the work that follows on this stream.
  __threadfence_system();
}

}  // namespace

extern "C" int bps_wait_for_host_word(const uint32_t* word, uint32_t target, void* stream) {
  WaitForHostWord<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(word, target);
  return static_cast<int>(cudaGetLastError());
}
