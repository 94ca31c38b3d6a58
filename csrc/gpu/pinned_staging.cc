#include "gpu/pinned_staging.h"

#include <cuda_runtime_api.h>

#include <string>

#include "gpu/cuda_status.h"

namespace bps {
namespace gpu {

size_t PinnedStagingPool::ClassOf(size_t bytes) {
  if (bytes <= 4096) return 4096;
  size_t top = 4096;
  while (top < bytes) top <<= 1;
  const size_t eighth = top / 16;  // classes between top/2 and top, 1/8 of top/2 apart
  return (bytes + eighth - 1) / eighth * eighth;
}

PinnedStagingPool::~PinnedStagingPool() {
  for (auto& entry : class_of_) cudaFreeHost(entry.first);
}

Status PinnedStagingPool::Acquire(size_t bytes, char** out) {
  const size_t size = ClassOf(bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.empty()) {
      *out = it->second.back();
      it->second.pop_back();
      return Status::OK();
    }
  }
  void* p = nullptr;
  // Portable: usable from every context of the process (torch and CuPy each
  // may hold their own handles to the same device).
  BPS_RETURN_IF_ERROR(CudaStatus(cudaHostAlloc(&p, size, cudaHostAllocPortable),
                                 ("cudaHostAlloc of " + std::to_string(size) + " bytes of pinned staging").c_str()));
  std::lock_guard<std::mutex> lock(mu_);
  class_of_[static_cast<char*>(p)] = size;
  allocated_bytes_ += size;
  *out = static_cast<char*>(p);
  return Status::OK();
}

void PinnedStagingPool::Release(char* buffer) {
  if (!buffer) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = class_of_.find(buffer);
  if (it != class_of_.end()) free_[it->second].push_back(buffer);
}

uint64_t PinnedStagingPool::allocated_bytes() {
  std::lock_guard<std::mutex> lock(mu_);
  return allocated_bytes_;
}

uint64_t PinnedStagingPool::buffers() {
  std::lock_guard<std::mutex> lock(mu_);
  return class_of_.size();
}

}  // namespace gpu
}  // namespace bps
