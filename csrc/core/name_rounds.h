// The engine's per-name round state, in one owner (engine thread only).
// Every rank keys a tensor's partitions by its name, the name's generation
// and the partition index, and numbers the rounds of each key; ranks agree on
// all of it because they derive it from the same sequence of ops per name:
//   generation  a failed round (a mismatch, a passed deadline, a cancel)
//               moves the name to fresh keys on every rank, so leftovers of
//               the failed round in shared memory and on the servers cannot
//               block the next one;
//   name op     the name's n-th op of its generation (a relayed failure
//               names it);
//   rounds      per partition key, the next round to hand out and the first
//               round not yet closed (rounds of one key run one at a time).
#pragma once
#include <cstdint>
#include <unordered_map>

namespace bps {

class NameRounds {
 public:
  // The name hash an op of `plain_hash` keys its partitions with now.
  uint64_t KeyedName(uint64_t plain_hash) const;
  // A round of the name failed on every rank: its next ops use fresh keys.
  void MoveToFreshKeys(uint64_t plain_hash) { ++generation_[plain_hash]; }
  // This op's number among the ops of `keyed_name` (0, 1, ...).
  uint32_t TakeNameOp(uint64_t keyed_name) { return ops_of_name_[keyed_name]++; }
  // The round the next partition of `local_key` runs.
  uint32_t TakeRound(uint64_t local_key) { return next_round_[local_key]++; }
  // Whether every round of `local_key` before `round` has closed.
  bool IsTurnOf(uint64_t local_key, uint32_t round) const { return ClosedUpTo(local_key) == round; }
  // Rounds of `local_key` below this one have closed.
  uint32_t ClosedUpTo(uint64_t local_key) const;
  void Close(uint64_t local_key, uint32_t round) { closed_up_to_[local_key] = round + 1; }

 private:
  std::unordered_map<uint64_t, uint32_t> generation_;    // by plain name hash
  std::unordered_map<uint64_t, uint32_t> ops_of_name_;   // by keyed name hash
  std::unordered_map<uint64_t, uint32_t> next_round_;    // by partition key
  std::unordered_map<uint64_t, uint32_t> closed_up_to_;  // by partition key
};

}  // namespace bps
