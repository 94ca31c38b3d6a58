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
// One window per lane: the engine gives each server its own (issue 38,
// third part). With one window for all servers, the pushes to a server
// whose link was momentarily the slower one (every machine's pushes to it
// share its download) filled the window, and the machine's upload idled
// while it had partitions for the other servers ready: on 2 x H200 at
// 10 Gbit/s the window was full for 480 of VGG-16's 509 ms step, each push
// waited 3.4 ms for its receipt, and the upload moved 1.16 GB/s where NCCL
// moved 1.25.
//
// The engine thread admits partitions in scheduling order, one pass at a
// time (BeginPass, then TryAdmit for each ready partition); transport
// threads Release the bytes when a push's receipt arrived (or its receive
// ended first). Two rules keep each lane fair:
//  - An empty lane admits any partition, so one larger than the whole
//    budget still goes (alone) instead of waiting forever.
//  - Once a partition is refused in a pass, every later one of that lane in
//    that pass is refused too: smaller, lower-order partitions cannot keep
//    the lane from draining, so the refused one is admitted when it empties.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>

#include "common/steady_ns.h"

namespace bps {

class CreditWindow {
 public:
  // 0 = unlimited.
  explicit CreditWindow(uint64_t budget_bytes = 0, int lanes = 1) { Configure(budget_bytes, lanes); }

  // Before any admission: `budget_bytes` for each of `lanes` windows.
  void Configure(uint64_t budget_bytes, int lanes) {
    budget_ = budget_bytes;
    lanes_count_ = lanes < 1 ? 1 : lanes;
    lanes_.reset(new Lane[lanes_count_]);
  }
  uint64_t budget() const { return budget_; }
  int lanes() const { return lanes_count_; }
  // The lane of a push to `server`: its own with a window per server, else the one.
  int LaneOf(int server) const { return lanes_count_ > 1 ? server : 0; }
  uint64_t in_flight(int lane) const { return lanes_[lane].in_flight.load(std::memory_order_acquire); }
  uint64_t in_flight() const {
    uint64_t total = 0;
    for (int i = 0; i < lanes_count_; ++i) total += in_flight(i);
    return total;
  }

  // Engine thread: starts a scan of the ready partitions in scheduling order.
  void BeginPass() {
    for (int i = 0; i < lanes_count_; ++i) lanes_[i].blocked = false;
  }

  // Engine thread: the lane refused a partition in this pass, so it refuses
  // every later one; a caller may skip preparing a push it would not send.
  bool Refusing(int lane) const { return lanes_[lane].blocked; }

  // Engine thread: true (and the bytes are counted in flight) when the
  // partition may be sent now on `lane`.
  bool TryAdmit(int lane, uint64_t bytes) {
    Lane& l = lanes_[lane];
    if (l.blocked) return false;
    // Only Release runs concurrently, and it only lowers in_flight, so a
    // decision taken on this load stays within the budget.
    uint64_t now = l.in_flight.load(std::memory_order_acquire);
    if (budget_ != 0 && now != 0 && now + bytes > budget_) {
      // Say the lane waits, then look again: a Release either sees the
      // flag (and wakes the engine) or its bytes are gone from this load.
      l.waiting.store(true, std::memory_order_seq_cst);
      now = l.in_flight.load(std::memory_order_seq_cst);
      if (now != 0 && now + bytes > budget_) {
        l.blocked = true;
        if (l.stalled_since_ns == 0) l.stalled_since_ns = SteadyNowNs();
        return false;
      }
    }
    l.waiting.store(false, std::memory_order_relaxed);
    if (l.stalled_since_ns != 0) {
      stalled_ns_.fetch_add(SteadyNowNs() - l.stalled_since_ns, std::memory_order_relaxed);
      l.stalled_since_ns = 0;
    }
    l.in_flight.fetch_add(bytes, std::memory_order_acq_rel);
    return true;
  }
  bool TryAdmit(uint64_t bytes) { return TryAdmit(0, bytes); }

  // Any thread: an admitted partition's round trip is over. True when a
  // partition was refused on the lane since its last admission: only then
  // must the engine be woken for it (a wakeup per receipt is a context
  // switch on a busy host, issue 38).
  bool Release(int lane, uint64_t bytes) {
    Lane& l = lanes_[lane];
    l.in_flight.fetch_sub(bytes, std::memory_order_seq_cst);
    return l.waiting.load(std::memory_order_seq_cst);
  }
  bool Release(uint64_t bytes) { return Release(0, bytes); }

  // Time ready pushes waited for their lane (from a lane's first refusal to
  // its next admission, summed over lanes): whether the window, not the
  // data, held the link idle.
  uint64_t stalled_ns() const { return stalled_ns_.load(std::memory_order_relaxed); }

 private:
  struct Lane {
    std::atomic<uint64_t> in_flight{0};
    std::atomic<bool> waiting{false};  // refused since the last admission (written by the engine)
    bool blocked = false;           // engine thread only
    uint64_t stalled_since_ns = 0;  // engine thread only
  };
  uint64_t budget_ = 0;
  int lanes_count_ = 1;
  std::unique_ptr<Lane[]> lanes_;
  std::atomic<uint64_t> stalled_ns_{0};
};

}  // namespace bps
