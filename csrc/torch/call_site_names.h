// Engine names and priorities for the collectives of one c10d group.
//
// The c10d API carries no tensor names, so a call is named by what every
// rank agrees on: the group, the operation, the dtype, the size, and how many
// calls of that signature came before it ("c10d.<group>.allreduce.f32.1024.3").
// Counting occurrences keeps two equal-size DDP buckets of one step on two
// names, so they travel side by side instead of one after the other. The
// count cycles through a signature's slots so that the set of names stays
// bounded; a signature that recurs more often than that while earlier calls
// are still in flight only queues behind its own slot (correct, only later).
//
// Each slot is an engine key with staging of its own while in flight: a
// 64 MB tensor cycling through 32 slots once held 2 GB and paid a cold call
// 32 times (issue 27; staging and server buffers are now pooled and taken
// back from idle keys). So a signature gets only as many slots as fit
// BYTEPS_C10D_SLOT_BYTES (default 16 MiB; at least 1, at most
// BYTEPS_C10D_NAME_SLOTS, default 32). Large tensors lose nothing by it: one
// already spans several partitions (BYTEPS_PARTITION_BYTES) that travel side
// by side, and a second call's partition waits only for the same partition
// of the first. Small tensors (DDP's buckets of one layer) keep their slots.
//
// Priorities: the engine sends higher priorities first. DDP issues its buckets
// in reverse parameter order, so the bucket issued last holds the first
// layers, which the next forward needs first: for gradient reductions a later
// call gets a higher priority. Both name and priority depend only on the order
// of calls, which is the same on every rank.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace byteps_torch {

struct EngineCall {
  std::string name;
  int32_t priority;
};

class CallSiteNames {
 public:
  explicit CallSiteNames(std::string group_name);

  // `later_first`: gradient reductions (see above); others get priority 0.
  EngineCall Next(const char* op, const at::Tensor& wire, bool later_first);

  // The most recent calls, oldest first (diagnostics and tests).
  std::vector<EngineCall> Recent();

  // How many names a signature of `wire_bytes` cycles through.
  int64_t SlotsFor(int64_t wire_bytes) const;
  // Staging bytes the slots of one signature may hold (per local rank):
  // max(wire_bytes, BYTEPS_C10D_SLOT_BYTES).
  int64_t slot_bytes() const { return slot_bytes_; }
  int64_t max_slots() const { return slots_; }

 private:
  static constexpr size_t kRecent = 256;
  std::string group_name_;
  int64_t slots_;       // BYTEPS_C10D_NAME_SLOTS
  int64_t slot_bytes_;  // BYTEPS_C10D_SLOT_BYTES
  std::mutex mutex_;
  std::unordered_map<std::string, int64_t> occurrences_;
  int64_t later_first_calls_ = 0;
  std::deque<EngineCall> recent_;
};

}  // namespace byteps_torch
