// Keeps a machine's staging arena warm ahead of need (issue 27): a key seen
// for the first time takes slots that are already backed in /dev/shm and
// mapped into every local rank, so its first push_pull costs what a later one
// does. Before, a new 64 MB key's first call on 2 ranks spent ~40 ms per rank
// backing (fallocate) and mapping (MADV_POPULATE) its slots, 3-4x a warm call.
//
// One per process, beside its LocalSharedMemory. A background thread:
//   local rank 0  backs the arena's front up to the bump pointer plus the
//                 reserve (BYTEPS_LOCAL_STAGING_RESERVE x local ranks), a
//                 step at a time, so slots are carved from backed pages;
//   every rank    maps the backed front into its own page tables, so neither
//                 its own slots nor its peers' fault page by page.
// It works in steps of kStepBytes so that stopping (at shutdown) waits for
// one step at most, and it sleeps while there is nothing to do. A slot past
// the warm front (a tensor larger than the reserve, or the warmer behind)
// is backed and mapped on the spot, as without a pool: the warmer only ever
// moves work off the critical path, never correctness onto it.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "local/shared_memory.h"

namespace bps {

class StagingWarmer {
 public:
  static constexpr uint64_t kStepBytes = 16 << 20;
  // `grows`: this process backs the front (local rank 0). Maps what is
  // backed now before returning (at start: the reserve local rank 0 backed
  // before the others opened the arena), the rest in the background.
  StagingWarmer(LocalSharedMemory* shm, bool grows);
  ~StagingWarmer();  // Stop()
  StagingWarmer(const StagingWarmer&) = delete;
  StagingWarmer& operator=(const StagingWarmer&) = delete;

  // Joins the thread (before the segments are unmapped).
  void Stop();

 private:
  void Run();
  // One step of work; false when there was none.
  bool Step();

  LocalSharedMemory* shm_;
  const bool grows_;
  bool grow_failed_ = false;  // /dev/shm full: the slots' own backing says so, with the fix
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace bps
