// One machine's order of collective steps (the ordering rule of
// local_reducer.h), as BytePS's root NCCL loop: every local rank announces a
// step (a partition round's reduce-scatter or all-gather) once it could issue
// it; local rank 0 appends a step to the machine's order once all ranks
// announced it, several at a time as one batch, in its own scheduling order;
// every rank reads the order and issues exactly that. A round that any rank
// abandons (its op failed) becomes a failed decision for the steps the other
// ranks announced or will announce, so nobody waits for a collective that
// will never be issued.
//
// The channel is a block of the machine's shared control segment: one
// announcement ring per local rank (written by that rank, read by rank 0)
// and one ring of decisions (written by rank 0, read by all). With one local
// rank, or in Mode::kOwnOrder, a rank's announcements are its decisions.
#pragma once
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "common/status.h"
#include "local/local_limits.h"

namespace bps {

enum class CollectiveStep : uint8_t { kReduceScatter = 1, kAllGather = 2 };
const char* CollectiveStepName(CollectiveStep step);

constexpr uint32_t kOrderAnnounceSlots = 256;  // per local rank
constexpr uint32_t kOrderDecisionSlots = 1024;

struct OrderAnnouncement {
  uint64_t key;
  uint32_t round;
  uint8_t step;       // CollectiveStep; 0: the round is abandoned (text says why)
  uint8_t pad[3];
  int32_t priority;
  int32_t code;       // abandon: the failure's StatusCode value
  uint64_t seq;       // submission order on the announcing rank
  uint32_t partition;
  uint32_t pad2;
  uint64_t signature;  // dtype, shape, operation: local ranks must agree
  int64_t count;
  char text[112];      // "'name' float32 [10, 5] (sum)", or the abandon's reason
};

struct OrderDecision {
  uint64_t key;
  uint32_t round;
  uint8_t step;        // CollectiveStep
  uint8_t failed;      // the step is not issued: the round failed (text, code)
  uint8_t batch_end;   // last decision of a batch (one ncclGroupStart/End)
  uint8_t pad;
  int32_t code;
  char text[236];
};

struct alignas(64) OrderRing {
  std::atomic<uint64_t> written;  // by the announcing rank
  char pad0[56];
  std::atomic<uint64_t> read;     // by local rank 0
  char pad1[56];
  OrderAnnouncement slots[kOrderAnnounceSlots];
};

struct CollectiveOrderShm {
  OrderRing announced[kMaxLocalRanks];
  alignas(64) std::atomic<uint64_t> decided;       // decisions published (whole batches)
  alignas(64) std::atomic<uint64_t> consumed[kMaxLocalRanks];
  OrderDecision decisions[kOrderDecisionSlots];
};

class CollectiveOrder {
 public:
  enum class Mode {
    kMachineOrder,  // local rank 0 decides (the ordering rule)
    // Each rank issues its own announcements in the order it made them: how
    // the GPU path issued collectives before the rule (tests show it breaks).
    kOwnOrder,
  };
  struct Step {
    uint64_t key = 0;
    uint32_t round = 0;
    CollectiveStep step = CollectiveStep::kReduceScatter;
    bool failed = false;
    int32_t code = 0;
    std::string why;
  };

  // `shm` null: one local rank (or kOwnOrder), no shared state. `ring`
  // wakes every local rank's engine.
  CollectiveOrder(CollectiveOrderShm* shm, int local_rank, int local_size, Mode mode, std::function<void()> ring);

  // This rank could issue `step` of round `round` of `key` now.
  void Announce(uint64_t key, uint32_t round, CollectiveStep step, int32_t priority, uint64_t seq,
                uint32_t partition, uint64_t signature, int64_t count, const std::string& what);
  // This rank's round failed: the others fail the steps they announced for
  // it, or will announce, with `why`.
  void Abandon(uint64_t key, uint32_t round, int32_t code, const std::string& why);
  // Local rank 0: turns announcements into decisions. True when it decided any.
  bool Decide();
  // The next batch of the machine's order for this rank (empty: none yet).
  std::vector<Step> NextBatch();

 private:
  using StepKey = std::tuple<uint64_t, uint32_t, uint8_t>;
  // A step's place in a rank's scheduling order: highest priority first,
  // then submission, partition and step (rank 0's order for the machine, a
  // lone rank's for itself); the StepKey after it makes it unique (an
  // all-gather is announced without a priority of its own).
  using ScheduleKey = std::pair<std::tuple<int64_t, uint64_t, uint32_t, uint8_t>, StepKey>;
  static ScheduleKey ScheduleOf(int32_t priority, uint64_t seq, uint32_t partition, const StepKey& step) {
    return {{-static_cast<int64_t>(priority), seq, partition, std::get<2>(step)}, step};
  }
  struct Pending {
    uint32_t ranks = 0;  // bit q: rank q announced
    int32_t priority = 0;
    uint64_t seq = 0;
    uint32_t partition = 0;
    bool have_root = false;
    uint64_t signature[kMaxLocalRanks] = {};
    int64_t count[kMaxLocalRanks] = {};
    std::string what[kMaxLocalRanks];
  };
  struct Abandoned {
    int32_t code;
    std::string why;
  };
  bool Shared() const { return shm_ != nullptr && mode_ == Mode::kMachineOrder; }
  void Push(const OrderAnnouncement& a);
  void Flush();  // the backlog into this rank's ring, as far as it has room
  void Take(const OrderAnnouncement& a, int q);
  uint64_t MinConsumed() const;

  CollectiveOrderShm* shm_;
  const int local_rank_;
  const int local_size_;
  const Mode mode_;
  std::function<void()> ring_;
  std::deque<OrderAnnouncement> backlog_;  // announcements waiting for room in this rank's ring
  // kOwnOrder / one rank: the announcements not issued yet, in this rank's
  // scheduling order, as rank 0 decides a machine's. The reducer issues a
  // bounded amount ahead (Config::device_copy_ahead_bytes), so a step
  // announced later with a higher priority overtakes those still waiting, as
  // in BytePS's queues: under cross-barrier the first layers' gradients are
  // announced last and needed first.
  std::map<ScheduleKey, Step> own_;
  // Local rank 0's view.
  std::map<StepKey, Pending> pending_;
  std::map<std::pair<uint64_t, uint32_t>, Abandoned> abandoned_;  // rounds that failed on some rank
  std::vector<OrderDecision> undecided_;  // decided, waiting for room in the ring
};

}  // namespace bps
