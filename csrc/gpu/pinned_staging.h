// Page-locked host buffers that carry this rank's reduced slices between the
// GPU and the network (cudaHostAlloc: pinned and registered with the driver
// once), reused every step. Reuse goes by size, not by tensor name: DDP
// renames its buckets when it rebuilds them after the first iteration, and
// buffers kept per name would then double the staging. A request that finds
// no free buffer of its size and would grow the pool past the most ever in
// flight at once first returns every free buffer to the driver (they belong
// to a layout no longer in use), so a job's staging settles at what is in
// flight: about 1/local_size of the gradient bytes per process,
// the gradient bytes per machine.
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

  // A buffer of at least `bytes` (at most 1/8 more): a free one when there is
  // one (steady state), else a fresh allocation. `name` is for errors only.
  Status Acquire(const std::string& name, size_t bytes, char** out);
  void Release(char* buffer);

  uint64_t allocated_bytes() const { return allocated_bytes_; }
  uint64_t buffers() const { return buffers_; }

 private:
  struct Buffer {
    char* data = nullptr;
    size_t bytes = 0;
  };
  std::mutex mu_;
  std::vector<Buffer> free_;
  std::unordered_map<char*, size_t> sizes_;
  uint64_t allocated_bytes_ = 0;
  uint64_t in_use_bytes_ = 0;       // handed out, not yet released
  uint64_t peak_in_use_bytes_ = 0;  // the most ever in flight at once (plus one request)
  uint64_t buffers_ = 0;
};

}  // namespace gpu
}  // namespace bps
