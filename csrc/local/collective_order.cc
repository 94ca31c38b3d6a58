#include "local/collective_order.h"

#include <algorithm>
#include <cstring>

namespace bps {
namespace {

void CopyText(char* dst, size_t capacity, const std::string& text) {
  const size_t n = std::min(capacity - 1, text.size());
  std::memcpy(dst, text.data(), n);
  dst[n] = '\0';
}

}  // namespace

const char* CollectiveStepName(CollectiveStep step) {
  switch (step) {
    case CollectiveStep::kReduceScatter: return "reduce-scatter";
    case CollectiveStep::kAllGather: return "all-gather";
  }
  return "?";
}

CollectiveOrder::CollectiveOrder(CollectiveOrderShm* shm, int local_rank, int local_size, Mode mode,
                                 std::function<void()> ring)
    : shm_(local_size > 1 ? shm : nullptr), local_rank_(local_rank), local_size_(local_size), mode_(mode),
      ring_(std::move(ring)) {}

void CollectiveOrder::Announce(uint64_t key, uint32_t round, CollectiveStep step, int32_t priority, uint64_t seq,
                               uint32_t partition, uint64_t signature, int64_t count, const std::string& what) {
  if (!Shared()) {
    Step s;
    s.key = key;
    s.round = round;
    s.step = step;
    own_.emplace(ScheduleOf(priority, seq, partition, StepKey{key, round, static_cast<uint8_t>(step)}), s);
    return;
  }
  OrderAnnouncement a{};
  a.key = key;
  a.round = round;
  a.step = static_cast<uint8_t>(step);
  a.priority = priority;
  a.seq = seq;
  a.partition = partition;
  a.signature = signature;
  a.count = count;
  CopyText(a.text, sizeof(a.text), what);
  Push(a);
}

void CollectiveOrder::Abandon(uint64_t key, uint32_t round, int32_t code, const std::string& why) {
  if (!Shared()) {
    // Alone (or each rank on its own): steps already announced still run,
    // nothing else is waiting for this rank.
    return;
  }
  OrderAnnouncement a{};
  a.key = key;
  a.round = round;
  a.step = 0;
  a.code = code;
  CopyText(a.text, sizeof(a.text), why);
  Push(a);
}

void CollectiveOrder::Push(const OrderAnnouncement& a) {
  backlog_.push_back(a);
  Flush();
}

void CollectiveOrder::Flush() {
  OrderRing& ring = shm_->announced[local_rank_];
  uint64_t written = ring.written.load(std::memory_order_relaxed);
  const uint64_t read = ring.read.load(std::memory_order_acquire);
  bool pushed = false;
  while (!backlog_.empty() && written - read < kOrderAnnounceSlots) {
    ring.slots[written % kOrderAnnounceSlots] = backlog_.front();
    backlog_.pop_front();
    ++written;
    pushed = true;
  }
  if (pushed) {
    ring.written.store(written, std::memory_order_release);
    ring_();
  }
}

uint64_t CollectiveOrder::MinConsumed() const {
  uint64_t least = UINT64_MAX;
  for (int q = 0; q < local_size_; ++q) least = std::min(least, shm_->consumed[q].load(std::memory_order_acquire));
  return least;
}

void CollectiveOrder::Take(const OrderAnnouncement& a, int q) {
  const auto round_key = std::make_pair(a.key, a.round);
  auto failed_round = abandoned_.find(round_key);
  auto fail = [&](uint8_t step, int32_t code, const std::string& why) {
    OrderDecision d{};
    d.key = a.key;
    d.round = a.round;
    d.step = step;
    d.failed = 1;
    d.code = code;
    CopyText(d.text, sizeof(d.text), why);
    undecided_.push_back(d);
  };
  if (a.step == 0) {
    if (failed_round != abandoned_.end()) return;
    const std::string why = a.text;
    abandoned_[round_key] = Abandoned{a.code, why};
    // Steps of this round that some ranks announced and others now never will.
    for (uint8_t step : {uint8_t(CollectiveStep::kReduceScatter), uint8_t(CollectiveStep::kAllGather)}) {
      auto it = pending_.find(StepKey{a.key, a.round, step});
      if (it == pending_.end()) continue;
      pending_.erase(it);
      fail(step, a.code, why);
    }
    return;
  }
  if (failed_round != abandoned_.end()) {
    fail(a.step, failed_round->second.code, failed_round->second.why);
    return;
  }
  Pending& p = pending_[StepKey{a.key, a.round, a.step}];
  p.ranks |= 1u << q;
  p.signature[q] = a.signature;
  p.count[q] = a.count;
  p.what[q] = a.text;
  if (q == 0 || !p.have_root) {
    // Rank 0's scheduling order decides; another rank's stands in until it announced.
    p.priority = a.priority;
    p.seq = a.seq;
    p.partition = a.partition;
    p.have_root = q == 0;
  }
}

bool CollectiveOrder::Decide() {
  if (!Shared() || local_rank_ != 0) return false;
  bool took = false;
  for (int q = 0; q < local_size_; ++q) {
    OrderRing& ring = shm_->announced[q];
    uint64_t read = ring.read.load(std::memory_order_relaxed);
    const uint64_t written = ring.written.load(std::memory_order_acquire);
    for (; read < written; ++read) Take(ring.slots[read % kOrderAnnounceSlots], q);
    if (ring.read.exchange(read, std::memory_order_release) != read) took = true;
  }
  // Every step all ranks announced, in rank 0's scheduling order.
  const uint32_t everyone = local_size_ >= 32 ? ~0u : (1u << local_size_) - 1;
  std::vector<ScheduleKey> ready;
  for (auto& [key, p] : pending_) {
    if (p.ranks != everyone) continue;
    ready.push_back(ScheduleOf(p.priority, p.seq, p.partition, key));
  }
  std::sort(ready.begin(), ready.end());
  for (auto& entry : ready) {
    const StepKey key = entry.second;
    Pending& p = pending_[key];
    OrderDecision d{};
    d.key = std::get<0>(key);
    d.round = std::get<1>(key);
    d.step = std::get<2>(key);
    for (int q = 1; q < local_size_; ++q) {
      if (p.signature[q] == p.signature[0] && p.count[q] == p.count[0]) continue;
      // Disagreeing tensors: no collective, the round fails on every rank.
      d.failed = 1;
      d.code = static_cast<int32_t>(StatusCode::kMismatch);
      CopyText(d.text, sizeof(d.text),
               "local ranks disagree: " + p.what[0] + " on local rank 0 but " + p.what[q] + " on local rank " +
                   std::to_string(q));
      abandoned_[std::make_pair(d.key, d.round)] = Abandoned{static_cast<int32_t>(StatusCode::kMismatch), d.text};
      break;
    }
    undecided_.push_back(d);
    pending_.erase(key);
  }
  if (undecided_.empty()) return took;
  // Publish as one batch what fits in the ring now; the rest waits.
  uint64_t decided = shm_->decided.load(std::memory_order_relaxed);
  const uint64_t room = kOrderDecisionSlots - (decided - MinConsumed());
  const size_t n = std::min<uint64_t>(room, undecided_.size());
  if (n == 0) return took;
  for (size_t i = 0; i < n; ++i) {
    undecided_[i].batch_end = i + 1 == n;
    shm_->decisions[(decided + i) % kOrderDecisionSlots] = undecided_[i];
  }
  undecided_.erase(undecided_.begin(), undecided_.begin() + static_cast<std::ptrdiff_t>(n));
  shm_->decided.store(decided + n, std::memory_order_release);
  ring_();
  return true;
}

std::vector<CollectiveOrder::Step> CollectiveOrder::NextBatch() {
  std::vector<Step> batch;
  if (!Shared()) {
    // One rank (or each on its own): its announcements, one step per batch.
    if (!own_.empty()) {
      batch.push_back(own_.begin()->second);
      own_.erase(own_.begin());
    }
    return batch;
  }
  if (!backlog_.empty()) Flush();  // room may have appeared in this rank's announcement ring
  uint64_t consumed = shm_->consumed[local_rank_].load(std::memory_order_relaxed);
  const uint64_t decided = shm_->decided.load(std::memory_order_acquire);
  while (consumed < decided) {
    const OrderDecision& d = shm_->decisions[consumed % kOrderDecisionSlots];
    Step s;
    s.key = d.key;
    s.round = d.round;
    s.step = static_cast<CollectiveStep>(d.step);
    s.failed = d.failed != 0;
    s.code = d.code;
    s.why = d.text;
    const bool end = d.batch_end != 0;
    batch.push_back(std::move(s));
    ++consumed;
    if (end) break;
  }
  if (!batch.empty()) {
    shm_->consumed[local_rank_].store(consumed, std::memory_order_release);
    if (local_rank_ != 0) ring_();  // rank 0 may wait for room in the ring
  }
  return batch;
}

}  // namespace bps
