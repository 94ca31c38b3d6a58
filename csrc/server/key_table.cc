#include "server/key_table.h"

namespace bps {

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
