// POSIX shared memory shared by the worker processes of one machine: a
// control segment (doorbells, pids, a table of per-partition rendezvous
// entries) and a staging arena (each partition's per-rank slots).
//
// Capacity: tmpfs pages are allocated on first touch, and touching a page
// that /dev/shm cannot supply kills the process with SIGBUS. So the control
// segment is backed in full when created, and each entry's slots when they
// are reserved (fallocate), and the arena never claims more than /dev/shm
// had free: a full /dev/shm is an error naming it (issue 13, bug 6).
//
// Lifetime: local rank 0 creates both segments; once every local rank has
// mapped them, rank 0 unlinks the names, so nothing is left in /dev/shm even
// if the job is killed. Names carry the creator's pid, so a crash before the
// unlink is cleaned by the next start (RemoveStaleSegments) or the launcher.
#pragma once
#include <atomic>
#include <cstddef>
#include <memory>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace bps {

constexpr int kMaxLocalRanks = 16;
constexpr uint32_t kDefaultShmKeyTableSize = 8192;  // BYTEPS_LOCAL_KEY_TABLE_SIZE

struct alignas(64) ShmEntry {
  std::atomic<uint64_t> key;          // 0 = free; set by the first rank to see it
  std::atomic<uint32_t> initialized;  // 1 once bytes/offset are valid
  uint32_t dtype;
  uint64_t bytes;                     // partition bytes (every rank's slot)
  uint64_t arena_offset;              // slot q at arena_offset + q * bytes
  // Monotonic counters: round r is staged when arrived >= (r+1)*L, etc.
  std::atomic<uint32_t> arrived;
  std::atomic<uint32_t> released;
  std::atomic<uint32_t> ready[kMaxLocalRanks];  // slice q reduced for round ready[q]-1
  std::atomic<uint32_t> error_round;  // round+1 that failed; code and message below
  int32_t error_code;                 // a BpsStatus: a relayed peer failure stays one
  char error[384];
  uint64_t signature[kMaxLocalRanks];
  uint64_t tensor_bytes[kMaxLocalRanks];
  char shape[kMaxLocalRanks][48];
};

struct ShmControl {
  uint32_t magic;
  uint32_t local_size;
  uint64_t arena_capacity;
  std::atomic<uint64_t> arena_used;
  std::atomic<uint32_t> doorbell[kMaxLocalRanks];
  std::atomic<uint32_t> sleeping[kMaxLocalRanks];
  int32_t pids[kMaxLocalRanks];
  std::atomic<uint32_t> job_failed;
  char job_error[512];
  uint32_t key_table_size;             // entries that follow this block
  std::atomic<uint32_t> keys_used;
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

  // Finds or creates the entry for key with the given slot size. Returns a
  // clear error when the table (naming its size and
  // BYTEPS_LOCAL_KEY_TABLE_SIZE) or the arena is full (naming /dev/shm and
  // how to enlarge it), or the size disagrees. Entries live as long as the
  // job: ranks count rounds per key, so a reclaimed key would restart its
  // rounds on some ranks and not on others.
  Status Lookup(uint64_t key, uint64_t bytes, uint32_t dtype, ShmEntry** out);

  void Ring();  // wake every local rank's engine
  void WaitDoorbell(int local_rank, uint32_t seen, int timeout_ms);

 private:
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
};

}  // namespace bps
