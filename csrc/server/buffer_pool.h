// The server's memory for pushes, sums and answers: 64-byte-aligned buffers
// pooled by size, shared by every I/O thread and every key (issue 27).
//
// Before, each key held its last answer's buffer until its next round, so a
// key seen for the first time allocated fresh memory on the push path (and
// first-touched it page by page), and a job cycling through many names held
// one buffer per name for good. Now a buffer goes back to the pool the moment
// its last holder lets go (a push summed, an answer written to every
// contributor), so a key between rounds holds nothing and a new key takes
// memory that earlier rounds already touched. The pool is warmed at start
// (a few partitions' worth, touched in the background) so that a job's very
// first keys find warm memory too.
//
// Bounded: at most `keep_bytes` (BYTEPS_SERVER_BUFFER_POOL) wait free in the
// pool; a buffer let go past that is freed. What the server holds is the
// rounds in flight plus at most that. Stats() reports both.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>
#include <thread>

namespace bps {

struct AlignedBuffer {
  AlignedBuffer() = default;  // no memory: data stays null
  AlignedBuffer(size_t bytes, size_t capacity);
  explicit AlignedBuffer(size_t bytes) : AlignedBuffer(bytes, bytes) {}
  ~AlignedBuffer();
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  char* data = nullptr;
  size_t size = 0;      // the bytes its current use asked for
  size_t capacity = 0;  // the bytes allocated (a pooled buffer may be larger than asked)
};

struct BufferPoolStats {
  uint64_t free_bytes = 0;      // waiting in the pool, warm
  uint64_t held_bytes = 0;      // all live buffers: in use plus free
  uint64_t peak_held_bytes = 0;
  uint64_t keep_bytes = 0;      // the bound on free_bytes
  uint64_t allocations = 0;     // buffers made fresh (cold)
  uint64_t reuses = 0;          // takes served from the pool (warm)
};

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  // Free bytes kept for reuse at most.
  static std::shared_ptr<BufferPool> Create(uint64_t keep_bytes);
  ~BufferPool();  // joins the warming thread

  // A buffer of at least `bytes` (its `size` is `bytes`): a free one of
  // capacity [bytes, 2 x bytes], the smallest, else a fresh one. It returns
  // to the pool when its last shared_ptr goes, from any thread. data is null
  // when memory ran out.
  std::shared_ptr<AlignedBuffer> Take(size_t bytes);

  // In the background: `count` buffers of each of `sizes`, touched, into the
  // pool (within keep_bytes), so the first keys of a job find warm memory.
  void WarmInBackground(std::vector<size_t> sizes, int count);

  BufferPoolStats Stats();

 private:
  explicit BufferPool(uint64_t keep_bytes) : keep_bytes_(keep_bytes) {}
  static void Return(const std::weak_ptr<BufferPool>& pool, AlignedBuffer* b);
  std::shared_ptr<AlignedBuffer> Wrap(AlignedBuffer* b);
  void Keep(AlignedBuffer* b);  // into the free list, or freed past the bound

  const uint64_t keep_bytes_;
  std::mutex mu_;
  std::multimap<size_t, AlignedBuffer*> free_;  // by capacity; owned
  BufferPoolStats stats_;
  bool stopping_ = false;
  std::thread warmer_;
};

}  // namespace bps
