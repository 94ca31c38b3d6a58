#include "gpu/pinned_staging.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "gpu/cuda_status.h"

namespace bps {
namespace gpu {

PinnedStagingPool::~PinnedStagingPool() {
  // Never destroyed in practice (the GPU engine lives until exit); freeing
  // page-locked memory during static destruction could race the driver.
}

Status PinnedStagingPool::Acquire(const std::string& name, size_t bytes, char** out) {
  // A 64-byte floor keeps zero-byte requests distinct and aligned.
  const size_t size = bytes < 64 ? 64 : bytes;
  std::vector<Buffer> retired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    size_t best = free_.size();
    for (size_t i = 0; i < free_.size(); ++i) {
      const size_t have = free_[i].bytes;
      if (have >= size && have <= size + size / 8 && (best == free_.size() || have < free_[best].bytes)) best = i;
    }
    if (best != free_.size()) {
      *out = free_[best].data;
      in_use_bytes_ += free_[best].bytes;
      free_[best] = free_.back();
      free_.pop_back();
      return Status::OK();
    }
    // A miss. Growing past the most ever in flight at once means the free
    // buffers belong to a layout no longer in use: return them first.
    peak_in_use_bytes_ = std::max(peak_in_use_bytes_, in_use_bytes_ + size);
    if (allocated_bytes_ + size > peak_in_use_bytes_) {
      retired.swap(free_);
      for (const Buffer& b : retired) {
        sizes_.erase(b.data);
        allocated_bytes_ -= b.bytes;
        buffers_--;
      }
    }
  }
  for (const Buffer& b : retired) cudaFreeHost(b.data);
  void* p = nullptr;
  // Portable: usable from every context of the process (torch and CuPy each
  // may hold their own handles to the same device).
  BPS_RETURN_IF_ERROR(CudaStatus(cudaHostAlloc(&p, size, cudaHostAllocPortable),
                                 ("cudaHostAlloc of " + std::to_string(size) + " bytes of pinned staging for '" +
                                  name + "'").c_str()));
  std::lock_guard<std::mutex> lock(mu_);
  sizes_[static_cast<char*>(p)] = size;
  allocated_bytes_ += size;
  in_use_bytes_ += size;
  buffers_++;
  *out = static_cast<char*>(p);
  return Status::OK();
}

void PinnedStagingPool::Release(char* buffer) {
  if (!buffer) return;
  std::lock_guard<std::mutex> lock(mu_);
  const size_t bytes = sizes_[buffer];
  in_use_bytes_ -= bytes;
  free_.push_back(Buffer{buffer, bytes});
}

}  // namespace gpu
}  // namespace bps
