#include "gpu/stream_hold.h"

#include "gpu/cuda_status.h"

namespace bps {
namespace gpu {

StreamHolds& StreamHolds::Get() {
  static StreamHolds* holds = new StreamHolds();  // never destroyed: see the header
  return *holds;
}

Status StreamHolds::GrowLocked() {
  void* block = nullptr;
  // Portable: any device of the process may wait on it; mapped: a device
  // pointer reads the host's word.
  BPS_CUDA_RETURN(cudaHostAlloc(&block, kWordsPerBlock * sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable));
  void* device = nullptr;
  const cudaError_t mapped = cudaHostGetDevicePointer(&device, block, 0);
  if (mapped != cudaSuccess) {
    cudaFreeHost(block);
    return CudaStatus(mapped, "cudaHostGetDevicePointer (a stream hold's word)");
  }
  auto* host_words = static_cast<uint32_t*>(block);
  auto* device_words = static_cast<uint32_t*>(device);
  for (size_t i = 0; i < kWordsPerBlock; ++i) {
    host_words[i] = 0;
    auto word = std::make_unique<Word>();
    word->host = host_words + i;
    word->device = device_words + i;
    free_.push_back(word.get());
    words_.push_back(std::move(word));
  }
  return Status::OK();
}

Status StreamHolds::Hold(cudaStream_t stream, void** out) {
  Word* word = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.empty()) BPS_RETURN_IF_ERROR(GrowLocked());
    word = free_.back();
    free_.pop_back();
  }
  word->target = __atomic_load_n(word->host, __ATOMIC_RELAXED) + 1;
  const cudaError_t launched =
      static_cast<cudaError_t>(bps_wait_for_host_word(word->device, word->target, static_cast<void*>(stream)));
  if (launched != cudaSuccess) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(word);
    return CudaStatus(launched, "queueing a stream hold (the wait for a result that arrives through the host)");
  }
  *out = word;
  return Status::OK();
}

void StreamHolds::Release(void* hold) {
  auto* word = static_cast<Word*>(hold);
  // Release order: what the engine thread saw complete before this store
  // (the result's copies) precedes it for the polling thread.
  __atomic_store_n(word->host, word->target, __ATOMIC_RELEASE);
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(word);
}

}  // namespace gpu
}  // namespace bps
