// Stream-ordered completion of a result that reaches the GPU through the
// host (a push_pull across machines): work queued on a stream after Hold
// waits, on the GPU, until the engine's thread calls Release. The waiting is
// a one-thread kernel that polls a word of mapped host memory, as NCCL's
// network kernels wait for its proxy thread. The host never blocks for the
// result, so the caller's next kernels are queued long before it arrives:
// DDP's finalize used to block the host on the last bucket's answer, and the
// update and next forward were launched only then (issue 38: 4 ms a step).
//
// A kernel, not cuStreamWaitValue32: a stream blocked in the front end by a
// semaphore can hold back other streams that share its hardware queue,
// among them the engine's own copy streams whose completion the host waits
// for before it releases the word.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "common/status.h"

namespace bps {
namespace gpu {

class StreamHolds {
 public:
  // One per process: the words are never freed (a kernel may still read one
  // after its release), so they outlive every engine of the process.
  static StreamHolds& Get();

  // Queues on `stream` (of the current device) a wait that passes once
  // Release(*out) was called. *out is owned by the caller until Release.
  Status Hold(cudaStream_t stream, void** out);
  // Lets the hold's wait pass; exactly once per Hold, from any thread.
  void Release(void* hold);

 private:
  // A word's value only grows: a hold waits for its word to reach `target`,
  // so a word reused after its release cannot stall an earlier waiter.
  struct Word {
    uint32_t* host = nullptr;
    uint32_t* device = nullptr;
    uint32_t target = 0;
  };
  static constexpr size_t kWordsPerBlock = 1024;
  Status GrowLocked();

  std::mutex mu_;
  std::vector<std::unique_ptr<Word>> words_;
  std::vector<Word*> free_;
};

}  // namespace gpu
}  // namespace bps

extern "C" {
// Queues on `stream` one thread that returns once *word - target >= 0 (as
// int32: the words wrap). `word` is a device pointer to mapped host memory.
// Returns the cudaError_t of the launch.
int bps_wait_for_host_word(const uint32_t* word, uint32_t target, void* stream);
}
