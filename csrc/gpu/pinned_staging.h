// Page-locked host buffers that carry this rank's reduced slices between the
// GPU and the network (cudaHostAlloc: pinned and registered with the driver
// once). Pooled by size class (powers of two split in eighths, so a buffer
// wastes at most 1/8): a key seen for the first time takes a warm buffer of
// its class, renamed DDP buckets reuse the old ones, and the pool settles at
// what is in flight at once. Buffers are never returned to the driver while
// the pool lives: cudaFreeHost synchronises the device, which must never
// happen on the engine thread while collectives wait for peers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace bps {
namespace gpu {

class PinnedStagingPool {
 public:
  ~PinnedStagingPool();

  // A buffer of at least `bytes`: a free one of its size class, else a new one.
  Status Acquire(size_t bytes, char** out);
  void Release(char* buffer);

  uint64_t allocated_bytes();
  uint64_t buffers();

  // The size class of a request (exposed for the tests).
  static size_t ClassOf(size_t bytes);

 private:
  std::mutex mu_;
  std::map<size_t, std::vector<char*>> free_;  // by class
  std::unordered_map<char*, size_t> class_of_;
  uint64_t allocated_bytes_ = 0;
};

}  // namespace gpu
}  // namespace bps
