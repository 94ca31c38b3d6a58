#include "core/name_rounds.h"

#include "common/hashing.h"

namespace bps {

uint64_t NameRounds::KeyedName(uint64_t plain_hash) const {
  const auto generation = generation_.find(plain_hash);
  return generation == generation_.end() ? plain_hash : MixKey(plain_hash, generation->second, 0xfffe);
}

uint32_t NameRounds::ClosedUpTo(uint64_t local_key) const {
  const auto closed = closed_up_to_.find(local_key);
  return closed == closed_up_to_.end() ? 0 : closed->second;
}

}  // namespace bps
