// Page-locked host buffers that carry this rank's reduced slices between the
// GPU and the network. Allocated once per tensor name (cudaHostAlloc: pinned
// and registered with the driver once) and reused every step, so a training
// job's staging settles at the sum of its slices: about 1/local_size of the
// gradient bytes per process, the gradient bytes per machine.
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace bps {
namespace gpu {

class PinnedStagingPool {
 public:
  ~PinnedStagingPool();

  // A buffer of at least `bytes` for tensor `name`: a free one of that name
  // when there is one (steady state), else a fresh allocation. A name in
  // flight twice at once gets two buffers.
  Status Acquire(const std::string& name, size_t bytes, char** out);
  void Release(const std::string& name, char* buffer);

  uint64_t allocated_bytes() const { return allocated_bytes_; }
  uint64_t buffers() const { return buffers_; }

 private:
  struct Buffer {
    char* data = nullptr;
    size_t bytes = 0;
  };
  std::mutex mu_;
  std::unordered_map<std::string, std::vector<Buffer>> free_;
  std::unordered_map<char*, size_t> sizes_;
  uint64_t allocated_bytes_ = 0;
  uint64_t buffers_ = 0;
};

}  // namespace gpu
}  // namespace bps
