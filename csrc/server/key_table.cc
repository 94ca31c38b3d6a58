#include "server/key_table.h"

#include <cstdlib>


namespace bps {

AlignedBuffer::AlignedBuffer(size_t n) : size(n) {
  if (posix_memalign(reinterpret_cast<void**>(&data), 64, n ? n : 64) != 0) data = nullptr;
}
AlignedBuffer::~AlignedBuffer() { free(data); }

std::shared_ptr<AlignedBuffer> BufferPool::Take(size_t bytes) {
  auto it = free_.find(bytes);
  if (it != free_.end()) {
    auto b = std::move(it->second);
    free_.erase(it);
    return b;
  }
  return std::make_shared<AlignedBuffer>(bytes);
}

void BufferPool::Give(std::shared_ptr<AlignedBuffer> b) {
  // A buffer still referenced elsewhere (a response on the wire) is not ours.
  if (b && b->data && b->size > 0 && b.use_count() == 1 && free_.size() < 256) free_.emplace(b->size, std::move(b));
}

KeyState* KeyTable::Get(uint64_t key) {
  // Keys are already hashes (MixKey), but mix once more so that keys that
  // differ only in high bits still spread over the shards.
  Shard& shard = shards_[(key ^ (key >> 29) ^ (key >> 47)) % kShards];
  std::lock_guard<std::mutex> lock(shard.mu);
  auto& slot = shard.keys[key];
  if (!slot) slot.reset(new KeyState());
  return slot.get();
}

}  // namespace bps
