// POSIX shared memory shared by the worker processes of one machine: a
// control segment (doorbells, pids, a table of per-partition rendezvous
// entries) and a staging arena (each partition's per-rank slots).
//
// Capacity: tmpfs pages are allocated on first touch, and touching a page
// that /dev/shm cannot supply kills the process with SIGBUS. So the control
// segment is backed in full when created, and each slot when it is
// allocated (fallocate), and the arena never claims more than /dev/shm
// had free: a full /dev/shm is an error naming it (issue 13, bug 6).
//
// Reclaim: a slot freed (its entry reclaimed, its rank's partition grew, or
// its key idle when its rank needs a new slot: FreeIdleSlots) returns its
// range to a free list, its pages still backed, for the next slot; an entry of the key table is reclaimed, least recently used first,
// when the table is full and no local rank holds it or is inside one of its
// rounds, so a job may use any number of distinct names over its life
// (issue 20 item 12).
//
// A warm pool (issue 27): backing a slot (fallocate) and mapping its pages
// into each process (MADV_POPULATE) cost a new 64 MB key ~3x its warm call,
// so the arena's front [0, arena_backed) is backed, with no holes, and a
// slot carved from it is backed already. A StagingWarmer thread in each
// process keeps that front a reserve ahead of the slots (local rank 0 backs
// it, BYTEPS_LOCAL_STAGING_RESERVE per local rank) and maps all of it into
// its process, so a new key's first round touches only warm pages. Freed
// slots keep their pages: the arena holds at most the peak of its slots plus
// the reserve (stats: staging_backed_bytes), and gives it back at exit.
//
// Lifetime: local rank 0 creates both segments; once every local rank has
// mapped them, rank 0 unlinks the names, so nothing is left in /dev/shm even
// if the job is killed. Names carry the creator's pid, so a crash before the
// unlink is cleaned by the next start (RemoveStaleSegments) or the launcher.
#pragma once
#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "common/status.h"
#include "local/collective_order.h"
#include "local/local_limits.h"

namespace bps {

constexpr uint32_t kDefaultShmKeyTableSize = 8192;  // BYTEPS_LOCAL_KEY_TABLE_SIZE

constexpr uint32_t kMaxFreeExtents = 1024;  // arena free list; a fuller list drops the smallest range
constexpr uint32_t kNoBaseRound = UINT32_MAX;

// One partition key's rendezvous. Rounds are the key's n-th push_pull on every
// local rank; an entry made (or remade after a reclaim) mid-job counts from
// base_round, the round of its first use, which every local rank agrees on.
struct alignas(64) ShmEntry {
  std::atomic<uint64_t> key;          // 0 = never used, kReclaimedKey = free again; set last
  // Bit q: local rank q holds the entry (from Acquire until its round ended
  // on that rank). kEntryReclaiming: being reclaimed, hands off.
  std::atomic<uint32_t> holders;
  std::atomic<uint32_t> base_round;   // kNoBaseRound until the first round starts
  std::atomic<uint64_t> last_use;     // the table's use clock at the last Acquire (LRU)
  // Monotonic counters: round base+r is staged when arrived >= (r+1)*L, etc.
  std::atomic<uint32_t> arrived;
  std::atomic<uint32_t> released;
  std::atomic<uint32_t> ready[kMaxLocalRanks];  // slice q reduced for round ready[q]-1
  std::atomic<uint32_t> error_round;  // round+1 that failed; code and message below
  int32_t error_code;                 // a StatusCode's value: a relayed peer failure stays one
  char error[384];
  // Rank q's slot: written by rank q only, between rounds (so a partition may
  // change size when every rank agrees); read by the others after they saw
  // its arrival. 0 bytes: not allocated yet.
  uint64_t slot_offset[kMaxLocalRanks];
  uint64_t slot_bytes[kMaxLocalRanks];
  uint64_t signature[kMaxLocalRanks];
  uint64_t tensor_bytes[kMaxLocalRanks];
  char shape[kMaxLocalRanks][48];
};

constexpr uint64_t kReclaimedKey = UINT64_MAX;
constexpr uint32_t kEntryReclaiming = 1u << 31;

struct ShmExtent {
  uint64_t offset;
  uint64_t bytes;
};

struct ShmControl {
  uint32_t magic;
  uint32_t local_size;
  uint64_t arena_capacity;
  std::atomic<uint64_t> arena_used;    // the arena's high-water mark (bump pointer)
  std::atomic<uint64_t> arena_in_use;  // bytes in allocated slots
  // [0, arena_backed) is backed in /dev/shm, without holes: never lowered
  // (freed slots keep their pages), raised by a slot past it or the warmer.
  std::atomic<uint64_t> arena_backed;
  uint64_t warm_reserve;               // bytes the warmer keeps backed past arena_used
  std::atomic<uint32_t> doorbell[kMaxLocalRanks];
  std::atomic<uint32_t> sleeping[kMaxLocalRanks];
  int32_t pids[kMaxLocalRanks];
  std::atomic<uint32_t> job_failed;
  char job_error[512];
  uint32_t key_table_size;             // entries that follow this block
  std::atomic<uint32_t> keys_used;     // entries holding a key now
  std::atomic<uint64_t> keys_reclaimed;
  std::atomic<uint64_t> use_clock;
  // Serialises what changes the table's or the arena's layout (a new key,
  // a reclaim, a slot allocation); lookups of existing keys take no lock.
  // Robust: a rank dying inside does not block the others.
  pthread_mutex_t layout_mutex;
  uint32_t free_count;                 // under layout_mutex; sorted by offset
  ShmExtent free_extents[kMaxFreeExtents];
  // The machine's order of device collectives (collective_order.h).
  CollectiveOrderShm collective_order;
  // ShmEntry entries[key_table_size] follow, 64-byte aligned.
};

// The control segment: the block, then its key table.
inline size_t ShmControlBytes(uint32_t key_table_size) {
  return (sizeof(ShmControl) + 63) / 64 * 64 + static_cast<size_t>(key_table_size) * sizeof(ShmEntry);
}

class LocalSharedMemory {
 public:
  ~LocalSharedMemory();
  // Rank 0 creates; returns the base name others open.
  // `key_table_size` bounds the partition keys the job may use on this
  // machine (BYTEPS_LOCAL_KEY_TABLE_SIZE); `arena_bytes` 0 sizes the arena
  // by /dev/shm's free space.
  static Status Create(const std::string& job_id, int machine, int local_size, uint64_t arena_bytes,
                       uint32_t key_table_size, std::unique_ptr<LocalSharedMemory>* out);
  static Status Open(const std::string& base_name, int local_size, std::unique_ptr<LocalSharedMemory>* out);
  void Unlink();  // remove names; mappings stay valid
  static void RemoveStaleSegments();

  const std::string& base_name() const { return base_name_; }
  ShmControl* control() { return control_; }
  uint32_t key_table_size() const { return control_->key_table_size; }
  char* arena() { return arena_; }

  // Finds or creates the entry for `key` and marks it held by `local_rank`
  // (Release undoes that), so it is not reclaimed under the rank. A full
  // table first reclaims the least recently used entries that no rank holds
  // and that are between rounds; with none, *out stays null and the result is
  // OK: every entry is in use by operations in flight, try again later.
  Status Hold(uint64_t key, int local_rank, ShmEntry** out);
  void Release(ShmEntry* e, int local_rank);

  // Makes rank q's slot of `e` at least `bytes` (between rounds only).
  Status EnsureSlot(ShmEntry* e, int q, uint64_t bytes);
  // Rank q's slot of an entry whose round `round` (relative) was q's last:
  // idle once every local rank has released that round.
  struct IdleSlot {
    uint64_t key;
    uint32_t round;
  };
  // Frees rank q's slots in `idle` that no local rank reads any more (every
  // one released the round; nobody reads a slot again before its owner
  // stages into it, and the owner, q, is the caller, between rounds of
  // them), so their warm pages serve the next slot of any key; forgets those
  // and any whose entry was reclaimed meanwhile. Returns the bytes freed.
  uint64_t FreeIdleSlots(std::unordered_map<ShmEntry*, IdleSlot>* idle, int q);
  // Maps the arena's pages of [offset, offset + bytes) into this process
  // now (MADV_POPULATE_*), so the first pass over a new slot does not fault
  // page by page. Best effort; nothing to do below mapped_end().
  void Populate(uint64_t offset, uint64_t bytes, bool for_write);

  // The warm pool (staging_warmer.h drives these).
  // Backs the arena up to `target` bytes (at most `max_step` more now).
  // Local rank 0's warmer only: it is the one caller outside the layout lock.
  Status GrowBacked(uint64_t target, uint64_t max_step);
  // Maps up to `max_step` more bytes of the backed front into this process;
  // returns how many (0: all of it is mapped).
  uint64_t MapBacked(uint64_t max_step);
  // [0, mapped_end) is backed and mapped here: a slot inside needs neither.
  uint64_t mapped_end() const { return mapped_end_.load(std::memory_order_acquire); }
  uint64_t backed_bytes() const { return control_->arena_backed.load(std::memory_order_acquire); }
  // Sets the machine's reserve (local rank 0, before the others open).
  void set_warm_reserve(uint64_t bytes) { control_->warm_reserve = bytes; }
  uint64_t warm_reserve() const { return control_->warm_reserve; }

  void Ring();  // wake every local rank's engine
  void RingRank(int local_rank);  // wake one local rank's engine
  void WaitDoorbell(int local_rank, uint32_t seen, int timeout_ms);

 private:
  ShmEntry* Find(uint64_t key);
  Status Insert(uint64_t key, ShmEntry** out);  // under layout_mutex
  uint32_t ReclaimIdle();                      // under layout_mutex
  Status Allocate(uint64_t bytes, uint64_t* offset);  // under layout_mutex
  void RaiseBacked(uint64_t end);                      // arena_backed = max(arena_backed, end)
  void MapPages(uint64_t offset, uint64_t bytes, bool for_write);  // MADV_POPULATE_*
  void Free(uint64_t offset, uint64_t bytes);          // under layout_mutex

  std::string base_name_;
  bool owner_ = false;
  ShmControl* control_ = nullptr;
  size_t control_bytes_ = 0;
  ShmEntry* entries_ = nullptr;
  char* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  // Kept open: slots are backed with fallocate when reserved, so a full
  // /dev/shm is an error at reservation instead of SIGBUS on first touch.
  int arena_fd_ = -1;
  int local_size_ = 0;
  std::atomic<uint64_t> mapped_end_{0};  // this process's mapping (MapBacked)
};

}  // namespace bps
