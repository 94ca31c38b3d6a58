#include "gpu/pinned_staging.h"

#include <cuda_runtime_api.h>

#include "gpu/cuda_status.h"

namespace bps {
namespace gpu {

PinnedStagingPool::~PinnedStagingPool() {
  // Never destroyed in practice (the GPU engine lives until exit); freeing
  // page-locked memory during static destruction could race the driver.
}

Status PinnedStagingPool::Acquire(const std::string& name, size_t bytes, char** out) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(name);
    if (it != free_.end()) {
      auto& list = it->second;
      for (size_t i = 0; i < list.size(); ++i) {
        if (list[i].bytes >= bytes) {
          *out = list[i].data;
          list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
          return Status::OK();
        }
      }
    }
  }
  // A 64-byte floor keeps zero-byte requests distinct and aligned.
  const size_t size = bytes < 64 ? 64 : bytes;
  void* p = nullptr;
  // Portable: usable from every context of the process (torch and CuPy each
  // may hold their own handles to the same device).
  BPS_RETURN_IF_ERROR(CudaStatus(cudaHostAlloc(&p, size, cudaHostAllocPortable),
                                 ("cudaHostAlloc of " + std::to_string(size) + " bytes of pinned staging for '" +
                                  name + "'").c_str()));
  std::lock_guard<std::mutex> lock(mu_);
  sizes_[static_cast<char*>(p)] = size;
  allocated_bytes_ += size;
  buffers_++;
  *out = static_cast<char*>(p);
  return Status::OK();
}

void PinnedStagingPool::Release(const std::string& name, char* buffer) {
  if (!buffer) return;
  std::lock_guard<std::mutex> lock(mu_);
  free_[name].push_back(Buffer{buffer, sizes_[buffer]});
}

}  // namespace gpu
}  // namespace bps
