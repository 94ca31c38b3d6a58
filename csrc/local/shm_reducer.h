// The POSIX shared-memory LocalReducer: local ranks are processes (or, in
// tests, threads) that map one machine's LocalSharedMemory. Each partition
// key has one slot per local rank in the arena; counters in its ShmEntry
// order the rounds:
//   stage in   rank q copies the slices it does not own into its slot q
//              (arrived += 1; waits until released >= round * L), after
//              growing the slot if the partition grew since the last round
//              (every rank is between rounds then: no one reads slot q)
//   reduce     the owner of slice q sums it from its input (in place) and
//              the others' slots into its own slot
//   publish    ready[q] = round + 1
//   gather     every rank copies every published slice into its output
//              (released += 1)
// Slots come warm from the arena's pool (StagingWarmer, staging_warmer.h),
// and go back to it when their key is idle and this rank needs a new slot.
// The machine's doorbell, liveness and order channel in the same segment are
// ShmMachinePeers' (shm_machine_peers.h).
#pragma once
#include <memory>
#include <unordered_map>
#include <vector>

#include "local/local_reducer.h"
#include "local/shared_memory.h"
#include "local/staging_warmer.h"

namespace bps {

class ShmLocalReducer : public LocalReducer {
 public:
  // Local rank 0 creates the segments, the others open them; once all have
  // mapped them rank 0 unlinks the names.
  // Makes this rank's reducer and its machine's group (ShmMachinePeers),
  // both over the segments.
  static Status Create(const Config& config, Store* store, HostReducer* out);

  const char* name() const override { return "shm"; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }

  Status Acquire(uint64_t key, uint64_t bytes, DataType dtype, LocalPartition** out) override;
  void ReleasePartition(LocalPartition* p) override;
  LocalProgress StageIn(LocalPartition* p, uint32_t round, const LocalContribution& c) override;
  Status ReduceOwnSlice(LocalPartition* p, uint32_t round, const LocalContribution& c, char* also_into,
                        int64_t divisor, LocalProgress* progress) override;
  char* OwnSlice(LocalPartition* p, const LocalContribution& c) override;
  void PublishOwnSlice(LocalPartition* p, uint32_t round) override;
  Status Gather(LocalPartition* p, uint32_t round, const LocalContribution& c, char* output, int64_t divisor,
                uint32_t* gathered, LocalProgress* progress) override;
  void CloseFailedRound(LocalPartition* p, uint64_t key, uint64_t bytes, DataType dtype, uint32_t round,
                        const Status& why, bool staged) override;
  void FailRound(LocalPartition* p, uint32_t round, const Status& why) override;
  std::string DescribeStaging(LocalPartition* p, uint32_t round) override;

  uint64_t staging_bytes() override { return shm_->control()->arena_in_use.load(); }
  uint64_t staging_backed_bytes() override { return shm_->backed_bytes(); }
  uint64_t staging_reserve_bytes() override { return shm_->warm_reserve(); }
  uint64_t keys_used() override { return shm_->control()->keys_used.load(); }

 private:
  ShmLocalReducer() = default;
  char* Slot(ShmEntry* e, int q) { return shm_->arena() + e->slot_offset[q]; }
  // Another rank's slot, read: its pages are mapped here in one call the
  // first time this process reads that slot (LocalSharedMemory::Populate).
  const char* PeerSlot(ShmEntry* e, int q);

  // Shared with the machine's group (ShmMachinePeers): unmapped once both let go.
  std::shared_ptr<LocalSharedMemory> shm_;
  std::unique_ptr<StagingWarmer> warmer_;  // declared after shm_: stops before it unmaps
  std::unordered_map<uint64_t, uint64_t> populated_;  // peer slots mapped here: offset -> bytes
  // This rank's slots of keys between its rounds (each its last round): a
  // new slot first frees those every rank is done with, so a key seen for
  // the first time takes the warm pages of keys gone idle, and staging held
  // follows the rounds in flight rather than the names ever used (issue 27).
  std::unordered_map<ShmEntry*, LocalSharedMemory::IdleSlot> idle_slots_;
  int local_rank_ = 0;
  int local_size_ = 1;
  int machine_ = 0;
};

}  // namespace bps
