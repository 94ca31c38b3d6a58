#include "server/buffer_pool.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace bps {

AlignedBuffer::AlignedBuffer(size_t bytes, size_t cap) : size(bytes), capacity(std::max(bytes, cap)) {
  if (posix_memalign(reinterpret_cast<void**>(&data), 64, capacity ? capacity : 64) != 0) data = nullptr;
}
AlignedBuffer::~AlignedBuffer() { free(data); }

std::shared_ptr<BufferPool> BufferPool::Create(uint64_t keep_bytes) {
  return std::shared_ptr<BufferPool>(new BufferPool(keep_bytes));
}

BufferPool::~BufferPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  if (warmer_.joinable()) warmer_.join();
  for (auto& kv : free_) delete kv.second;
}

void BufferPool::Return(const std::weak_ptr<BufferPool>& pool, AlignedBuffer* b) {
  if (auto p = pool.lock()) {
    p->Keep(b);
  } else {
    delete b;  // the server is gone
  }
}

void BufferPool::Keep(AlignedBuffer* b) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (b->data && !stopping_ && stats_.free_bytes + b->capacity <= keep_bytes_) {
      free_.emplace(b->capacity, b);
      stats_.free_bytes += b->capacity;
      return;
    }
    stats_.held_bytes -= b->capacity;
  }
  delete b;  // past the bound: freed, outside the lock
}

std::shared_ptr<AlignedBuffer> BufferPool::Wrap(AlignedBuffer* b) {
  std::weak_ptr<BufferPool> pool = weak_from_this();
  return std::shared_ptr<AlignedBuffer>(b, [pool](AlignedBuffer* x) { Return(pool, x); });
}

std::shared_ptr<AlignedBuffer> BufferPool::Take(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The smallest free buffer that fits, if it wastes at most half of itself.
    auto it = free_.lower_bound(bytes);
    if (it != free_.end() && it->first / 2 <= std::max<size_t>(bytes, 64)) {
      AlignedBuffer* b = it->second;
      free_.erase(it);
      stats_.free_bytes -= b->capacity;
      stats_.reuses++;
      b->size = bytes;
      return Wrap(b);
    }
  }
  auto* b = new AlignedBuffer(bytes);
  if (!b->data) {
    delete b;
    return std::make_shared<AlignedBuffer>();  // data null: the caller reports it
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.allocations++;
    stats_.held_bytes += b->capacity;
    stats_.peak_held_bytes = std::max(stats_.peak_held_bytes, stats_.held_bytes);
  }
  return Wrap(b);
}

void BufferPool::WarmInBackground(std::vector<size_t> sizes, int count) {
  if (count <= 0 || warmer_.joinable()) return;
  warmer_ = std::thread([this, sizes, count] {
    // Background work: the I/O threads come first.
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10);
    for (size_t bytes : sizes) {
      for (int i = 0; bytes > 0 && i < count; ++i) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (stopping_ || stats_.free_bytes + bytes > keep_bytes_) return;
        }
        auto* b = new AlignedBuffer(bytes);
        if (!b->data) {
          delete b;
          return;
        }
        memset(b->data, 0, b->capacity);  // touched: its pages are there when a push lands
        std::lock_guard<std::mutex> lock(mu_);
        stats_.allocations++;
        stats_.held_bytes += b->capacity;
        stats_.peak_held_bytes = std::max(stats_.peak_held_bytes, stats_.held_bytes);
        if (stopping_ || stats_.free_bytes + b->capacity > keep_bytes_) {
          stats_.held_bytes -= b->capacity;
          delete b;
          return;
        }
        free_.emplace(b->capacity, b);
        stats_.free_bytes += b->capacity;
      }
    }
  });
}

BufferPoolStats BufferPool::Stats() {
  std::lock_guard<std::mutex> lock(mu_);
  BufferPoolStats s = stats_;
  s.keep_bytes = keep_bytes_;
  return s;
}

}  // namespace bps
