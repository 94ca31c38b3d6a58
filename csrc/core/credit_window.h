// Scheduling credits counted in bytes (issue 14): at most `budget` bytes of
// pushes are in flight at once, so many small partitions can be in flight
// beside a large one, and the budget means the same whatever the partition
// sizes are. A push is in flight from its admission until its server says it
// arrived whole (kReceived, issue 38): the bytes a process has written into
// its sockets are still queued for the link, and a window that closed when
// they were written admitted a whole step's partitions into the sockets at
// once. They then shared the link, every server answer waited for the
// slowest of them, and the download idled until the end of the upload
// (ResNet-50 at 10 Gbit/s: 0.68x NCCL). Not until the answer: that waits for
// the other machines' pushes, and two machines whose windows held different
// partitions then waited for each other forever.
//
// The engine thread admits partitions in scheduling order, one pass at a
// time (BeginPass, then TryAdmit for each ready partition); transport
// threads Release the bytes when a push's receipt arrived (or its receive
// ended first). Two rules keep it fair:
//  - An empty window admits any partition, so one larger than the whole
//    budget still goes (alone) instead of waiting forever.
//  - Once a partition is refused in a pass, every later one in that pass is
//    refused too: smaller, lower-order partitions cannot keep the window
//    from draining, so the refused one is admitted when the window empties.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>

namespace bps {

class CreditWindow {
 public:
  // 0 = unlimited.
  explicit CreditWindow(uint64_t budget_bytes = 0) : budget_(budget_bytes) {}

  void SetBudget(uint64_t budget_bytes) { budget_ = budget_bytes; }
  uint64_t budget() const { return budget_; }
  uint64_t in_flight() const { return in_flight_.load(std::memory_order_acquire); }

  // Engine thread: starts a scan of the ready partitions in scheduling order.
  void BeginPass() { blocked_ = false; }

  // Engine thread: true (and the bytes are counted in flight) when the
  // partition may be sent now.
  bool TryAdmit(uint64_t bytes) {
    if (blocked_) return false;
    // Only Release runs concurrently, and it only lowers in_flight_, so a
    // decision taken on this load stays within the budget.
    const uint64_t now = in_flight_.load(std::memory_order_acquire);
    if (budget_ != 0 && now != 0 && now + bytes > budget_) {
      blocked_ = true;
      if (stalled_since_ns_ == 0) stalled_since_ns_ = NowNs();
      return false;
    }
    if (stalled_since_ns_ != 0) {
      stalled_ns_.fetch_add(NowNs() - stalled_since_ns_, std::memory_order_relaxed);
      stalled_since_ns_ = 0;
    }
    in_flight_.fetch_add(bytes, std::memory_order_acq_rel);
    return true;
  }

  // Time a ready push waited for the window (from its first refusal to the
  // next admission): whether the window, not the data, held the link idle.
  uint64_t stalled_ns() const { return stalled_ns_.load(std::memory_order_relaxed); }

  static uint64_t NowNs() {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
  }

  // Any thread: an admitted partition's round trip is over.
  void Release(uint64_t bytes) { in_flight_.fetch_sub(bytes, std::memory_order_acq_rel); }

 private:
  uint64_t budget_;
  std::atomic<uint64_t> in_flight_{0};
  bool blocked_ = false;  // engine thread only
  uint64_t stalled_since_ns_ = 0;  // engine thread only
  std::atomic<uint64_t> stalled_ns_{0};
};

}  // namespace bps
