#include "local/sequenced_reducer.h"

#include <algorithm>

#include "common/logging.h"
#include "common/reduce_kernels.h"

namespace bps {
struct SequencedLocalReducer::Partition {
  uint64_t key = 0;
  uint32_t round = 0;
  CollectiveWork work;
  uint64_t staging_capacity = 0;
  bool waiting_reduce = false;  // reduce-scatter announced, not decided yet
  bool waiting_gather = false;  // all-gather announced, not decided yet
  bool issued_reduce = false;
  bool issued_gather = false;
  bool fused = false;
  bool prescaled = false;  // the own slice's average applied on the host (once)
  uint64_t copying_bytes = 0;  // in copying_ with these bytes (0: not in it)
  bool failed = false;
  Status failure;
};

// Where an average is divided must be the same on every machine of a job:
// the servers add the machines' shares, so either every share is already
// divided or none is. Floating point of at most 32 bits is divided before
// the network (on the device where the library can: NCCL's pre-multiplied
// sum, or a kernel for one GPU; else here, on the host staging, which holds
// the engine thread: 0.7 ms per 3.7 MB partition); integers and float64
// divide the total after it.
// (Machines of different sizes once disagreed: 2 + 1 GPUs averaged 4 for 2.)
static bool DividesBeforeTheNetwork(DataType dtype) {
  return dtype == DataType::kFloat32 || dtype == DataType::kFloat16 || dtype == DataType::kBFloat16;
}

SequencedLocalReducer::SequencedLocalReducer(const Config& config, std::unique_ptr<Collectives> collectives,
                                             const MachineLink& link, CollectiveOrder::Mode mode)
    : config_(config), local_rank_(config.local_rank), local_size_(config.local_size),
      collectives_(std::move(collectives)), link_(link),
      order_(link.order, config.local_rank, config.local_size, mode, link.ring) {}

SequencedLocalReducer::~SequencedLocalReducer() {
  for (auto& entry : partitions_) {
    Partition* p = entry.second.get();
    if (p->work.state) collectives_->Retire(&p->work);
    if (p->work.staging) collectives_->ReleaseStaging(p->work.staging);
  }
}

Status MakeSequencedReducer(const Config& config, std::unique_ptr<Collectives> collectives, const MachineLink& link,
                            DeviceReducer* out, CollectiveOrder::Mode mode) {
  if (config.local_size > 1 && !link.order) {
    return Status::Invalid("a device reducer over " + std::to_string(config.local_size) +
                           " local ranks needs the machine's order channel (shared memory)");
  }
  auto reducer = std::make_shared<SequencedLocalReducer>(config, std::move(collectives), link, mode);
  out->reducer = reducer;
  out->liveness = std::move(reducer);
  return Status::OK();
}

// Partitions in units of lcm(local sizes) * 16 elements: every machine's
// equal NCCL slices of a full partition are then whole multiples of 16, and
// all machines cut the same partitions (with equal machines, L * 16 as before).
// With one local rank on every machine the unit is 16 elements, which the
// host plan keeps too: a device tensor is then cut exactly as a host tensor
// is, so a GPU machine and a CPU machine of one job meet at the same keys
// (issue 39; the host plan also spreads a tensor's bytes evenly over the
// servers).
std::vector<Range> SequencedLocalReducer::PlanPartitions(int64_t count, int64_t elem_size, int64_t partition_bytes,
                                                         int num_servers, const std::vector<int>& job_local_sizes) const {
  const int64_t unit = LocalSizesLcm(job_local_sizes);
  if (unit == 1) {
    return bps::PlanPartitions(count, elem_size, partition_bytes, NetworkSliceStride(job_local_sizes), num_servers);
  }
  return PlanEqualSlicePartitions(count, elem_size, partition_bytes, static_cast<int>(unit));
}

// NCCL's equal slices of a machine of L ranks (the last partition padded).
Range SequencedLocalReducer::SliceOfLayout(int64_t count, int L, int q) const {
  const int64_t slice = (count + L - 1) / L;
  const int64_t off = std::min(count, slice * q);
  return Range{off, std::min(slice, count - off)};
}

Status SequencedLocalReducer::Acquire(uint64_t key, uint64_t bytes, DataType dtype, LocalPartition** out) {
  auto& slot = partitions_[key];
  if (!slot) {
    slot.reset(new Partition());
    slot->key = key;
    keys_++;
  }
  *out = reinterpret_cast<LocalPartition*>(slot.get());
  return Status::OK();
}

void SequencedLocalReducer::ReleasePartition(LocalPartition* lp) {
  Partition* p = Of(lp);
  StopCopying(p);
  if (p->work.state) collectives_->Retire(&p->work);
  if (p->fused) {
    std::lock_guard<std::mutex> lock(fused_mu_);
    delete p;
    return;
  }
  // The staging goes back to the pool between rounds: keys that come and go
  // (renamed buckets) reuse it instead of each holding their own.
  if (p->work.staging) collectives_->ReleaseStaging(p->work.staging);
  p->work.staging = nullptr;
  p->staging_capacity = 0;
}

LocalProgress SequencedLocalReducer::StageIn(LocalPartition* lp, uint32_t round, const LocalContribution& c) {
  Partition* p = Of(lp);
  const void* ready = c.ready_event;
  p->round = round;
  p->prescaled = false;
  p->waiting_reduce = p->waiting_gather = p->issued_reduce = p->issued_gather = false;
  p->failed = false;
  p->failure = Status::OK();
  CollectiveWork& w = p->work;
  w.input = c.input;
  w.output = c.output;
  w.count = c.count;
  w.slice = (c.count + local_size_ - 1) / local_size_;
  w.own_count = SliceOf(c.count, local_rank_).count;
  w.dtype = c.dtype;
  w.divisor = c.divisor;
  w.ready_event = const_cast<void*>(ready);
  w.key = p->key;
  w.round = round;
  w.compression = c.compression;
  auto ahead = failed_ahead_.find({p->key, round});
  if (ahead != failed_ahead_.end()) {
    p->failed = true;
    p->failure = ahead->second;
    failed_ahead_.erase(ahead);
    return LocalProgress::kDone;
  }
  const uint64_t bytes = static_cast<uint64_t>(std::max<int64_t>(w.slice, 1)) * DataTypeSize(c.dtype);
  if (!w.staging) {
    Status st = collectives_->AcquireStaging(bytes, &w.staging);
    if (!st.ok()) {
      p->failed = true;
      p->failure = st;
      order_.Abandon(p->key, round, static_cast<int32_t>(st.code()), st.message());
      return LocalProgress::kDone;
    }
  }
  announced_[{p->key, round}] = p;
  p->waiting_reduce = true;
  order_.Announce(p->key, round, CollectiveStep::kReduceScatter, c.priority, c.submit_seq, c.partition, c.signature,
                  c.count, std::string("'") + c.name + "' " + DataTypeName(c.dtype) + " " + c.shape);
  return LocalProgress::kDone;
}

bool SequencedLocalReducer::RoomToIssue() {
  while (!copying_.empty()) {
    Partition* p = copying_.front();
    bool done = p->failed;
    if (!done && !collectives_->Poll(&p->work, CollectivePhase::kReduced, &done).ok()) done = true;
    if (!done) break;
    copying_bytes_ -= p->copying_bytes;
    p->copying_bytes = 0;
    copying_.pop_front();
  }
  const int64_t ahead = config_.device_copy_ahead_bytes;
  return ahead <= 0 || copying_bytes_ < static_cast<uint64_t>(ahead);
}

void SequencedLocalReducer::StopCopying(Partition* p) {
  if (p->copying_bytes == 0) return;
  copying_bytes_ -= p->copying_bytes;
  p->copying_bytes = 0;
  copying_.erase(std::remove(copying_.begin(), copying_.end(), p), copying_.end());
}

bool SequencedLocalReducer::Progress() {
  if (aborted_) return false;
  bool moved = order_.Decide();
  // Bounded: what is not issued now is issued in a later pass of the
  // engine, once earlier copies finished (every local rank issues the same
  // order, each at its own pace).
  while (RoomToIssue()) {
    std::vector<CollectiveOrder::Step> batch = order_.NextBatch();
    if (batch.empty()) break;
    collectives_->BeginBatch();
    for (const auto& step : batch) Issue(step);
    Status st = collectives_->EndBatch();
    if (!st.ok()) Break(st);
    moved = true;
  }
  return moved;
}

void SequencedLocalReducer::Issue(const CollectiveOrder::Step& step) {
  const auto round_key = std::make_pair(step.key, step.round);
  auto it = announced_.find(round_key);
  if (step.failed) {
    const Status why(static_cast<StatusCode>(step.code), step.why);
    if (it == announced_.end()) {
      failed_ahead_[round_key] = why;  // this rank has not got to the round yet
      return;
    }
    Partition* p = it->second;
    if (!p->failed) {
      p->failed = true;
      p->failure = why;
    }
    (step.step == CollectiveStep::kReduceScatter ? p->waiting_reduce : p->waiting_gather) = false;
    if (!p->waiting_reduce && !p->waiting_gather) announced_.erase(it);
    return;
  }
  if (it == announced_.end()) {
    Break(Status::Internal(std::string("the machine's order issued a ") + CollectiveStepName(step.step) +
                           " this rank never announced (key " + std::to_string(step.key) + " round " +
                           std::to_string(step.round) + ")"));
    return;
  }
  // Issued even when this rank's op failed meanwhile: the other local ranks
  // issue it too, and the buffers stay valid until the round settled.
  Partition* p = it->second;
  Status st;
  if (step.step == CollectiveStep::kReduceScatter) {
    p->waiting_reduce = false;
    p->issued_reduce = true;
    st = collectives_->ReduceScatter(&p->work);
    if (st.ok() && p->copying_bytes == 0) {
      p->copying_bytes = std::max<uint64_t>(1, static_cast<uint64_t>(p->work.count) * DataTypeSize(p->work.dtype));
      copying_bytes_ += p->copying_bytes;
      copying_.push_back(p);
    }
  } else {
    p->waiting_gather = false;
    p->issued_gather = true;
    st = collectives_->AllGather(&p->work);
  }
  if (!p->waiting_reduce && !p->waiting_gather) announced_.erase(it);
  if (!st.ok()) Break(st);
}

Status SequencedLocalReducer::ReduceOwnSlice(LocalPartition* lp, uint32_t round, const LocalContribution& c,
                                             char* also_into, int64_t divisor, LocalProgress* progress) {
  Partition* p = Of(lp);
  *progress = LocalProgress::kWaiting;
  if (p->failed) return p->failure;
  BPS_RETURN_IF_ERROR(BrokenStatus());
  if (!p->issued_reduce) return Status::OK();
  bool done = false;
  Status st = collectives_->Poll(&p->work, CollectivePhase::kReduced, &done);
  if (!st.ok()) {
    Break(st);
    return st;
  }
  if (!done) return Status::OK();
  // A library that issued nothing (EndBatch failed) reports unrecorded
  // events as done: only a healthy reducer's reduce is.
  BPS_RETURN_IF_ERROR(BrokenStatus());
  CollectiveWork& w = p->work;
  if (w.divisor > 1 && DividesBeforeTheNetwork(w.dtype) && !collectives_->ScalesAverage(w.dtype) && !p->prescaled) {
    CopyScaled(w.staging, w.staging, w.own_count, w.dtype, w.divisor);
  }
  p->prescaled = true;
  *progress = LocalProgress::kDone;
  return Status::OK();
}

char* SequencedLocalReducer::OwnSlice(LocalPartition* lp, const LocalContribution& c) { return Of(lp)->work.staging; }

void SequencedLocalReducer::PublishOwnSlice(LocalPartition* lp, uint32_t round) {
  Partition* p = Of(lp);
  if (p->failed) return;
  CollectiveWork& w = p->work;
  // Integers and float64 divide the machines' total here (DividesBeforeTheNetwork).
  if (w.divisor > 1 && !DividesBeforeTheNetwork(w.dtype)) CopyScaled(w.staging, w.staging, w.own_count, w.dtype, w.divisor);
  Status st = collectives_->Upload(&w);
  if (!st.ok()) {
    Break(st);
    p->failed = true;
    p->failure = st;
    return;
  }
  announced_[{p->key, round}] = p;
  p->waiting_gather = true;
  order_.Announce(p->key, round, CollectiveStep::kAllGather, 0, 0, 0, 0, w.count, "");
}

Status SequencedLocalReducer::Gather(LocalPartition* lp, uint32_t round, const LocalContribution& c, char* output,
                                     int64_t divisor, uint32_t* gathered, LocalProgress* progress) {
  Partition* p = Of(lp);
  *progress = LocalProgress::kWaiting;
  if (p->failed) return p->failure;
  BPS_RETURN_IF_ERROR(BrokenStatus());
  if (!p->issued_gather) return Status::OK();
  bool done = false;
  Status st = collectives_->Poll(&p->work, CollectivePhase::kGathered, &done);
  if (!st.ok()) {
    Break(st);
    return st;
  }
  if (done) BPS_RETURN_IF_ERROR(BrokenStatus());
  if (done) {
    *gathered = local_size_ >= 32 ? ~0u : (1u << local_size_) - 1;
    *progress = LocalProgress::kDone;
  }
  return Status::OK();
}

Status SequencedLocalReducer::LaunchFused(const LocalContribution& c, void* stream, LocalPartition** out) {
  std::lock_guard<std::mutex> lock(fused_mu_);
  {
    std::lock_guard<std::mutex> b(broken_mu_);
    if (!broken_.ok()) return broken_;
  }
  std::unique_ptr<Partition> p(new Partition());
  p->fused = true;
  CollectiveWork& w = p->work;
  w.input = c.input;
  w.output = c.output;
  w.count = c.count;
  w.slice = c.count;
  w.own_count = c.count;
  w.dtype = c.dtype;
  w.divisor = c.divisor;
  w.ready_event = c.ready_event;
  BPS_RETURN_IF_ERROR(collectives_->AllReduce(&w, stream));
  p->issued_reduce = p->issued_gather = true;
  *out = reinterpret_cast<LocalPartition*>(p.release());
  return Status::OK();
}

bool SequencedLocalReducer::Settled(LocalPartition* lp, uint32_t round) {
  if (!lp) return true;
  Partition* p = Of(lp);
  if (!p->fused && p->round != round) return true;
  if (aborted_) return true;
  if (p->waiting_reduce || p->waiting_gather) return false;  // a decision may still come
  if (!p->issued_reduce) return true;
  bool done = false;
  Status st = collectives_->Poll(&p->work, p->issued_gather ? CollectivePhase::kGathered : CollectivePhase::kReduced,
                                 &done);
  return done || !st.ok();
}

void SequencedLocalReducer::CloseFailedRound(LocalPartition* lp, uint64_t key, uint64_t bytes, DataType dtype,
                                             uint32_t round, const Status& why, bool staged) {
  if (lp && Of(lp)->fused) return;
  if (lp && Of(lp)->round == round && !Of(lp)->failed) {
    Of(lp)->failed = true;
    Of(lp)->failure = why;
  }
  order_.Abandon(key, round, static_cast<int32_t>(why.code()), why.message());
}

void SequencedLocalReducer::FailRound(LocalPartition* lp, uint32_t round, const Status& why) {
  if (!lp || Of(lp)->fused) return;
  order_.Abandon(Of(lp)->key, round, static_cast<int32_t>(why.code()), why.message());
}

std::string SequencedLocalReducer::DescribeStaging(LocalPartition* lp, uint32_t round) {
  if (!lp) return "?";
  Partition* p = Of(lp);
  if (p->waiting_reduce) {
    return "its reduce-scatter waits for every local rank to announce it (machine order), or for the " +
           std::to_string(copying_.size()) + " issued before it to finish";
  }
  if (p->waiting_gather) return "its all-gather waits for every local rank to announce it (machine order)";
  if (p->issued_gather) return "its all-gather is issued but has not finished on the device";
  if (p->issued_reduce) return "its reduce-scatter is issued but has not finished on the device";
  return "not announced yet";
}

Status SequencedLocalReducer::CheckPeers(bool check_alive) {
  {
    std::lock_guard<std::mutex> lock(broken_mu_);
    if (!broken_.ok()) return broken_;
  }
  Status st = collectives_->CheckAsync();
  if (!st.ok()) Break(st);
  return st;
}

Status SequencedLocalReducer::BrokenStatus() {
  if (!is_broken_.load(std::memory_order_acquire)) return Status::OK();
  std::lock_guard<std::mutex> lock(broken_mu_);
  return broken_;
}

void SequencedLocalReducer::Break(const Status& why) {
  {
    std::lock_guard<std::mutex> lock(broken_mu_);
    if (!broken_.ok()) return;
    broken_ = why;
    is_broken_.store(true, std::memory_order_release);
  }
  BPS_LOG(Error) << collectives_->name() << " local reducer failed: " << why.message();
  link_.ring();
}

void SequencedLocalReducer::FailMachine(const std::string& why) {
  // The job failed: stop this rank's collectives so no kernel waits for a
  // peer that will never issue its side.
  if (aborted_.exchange(true)) return;
  {
    // Nothing completes as a success after this: an aborted collective's
    // events complete with whatever the buffers held.
    std::lock_guard<std::mutex> lock(broken_mu_);
    if (broken_.ok()) {
      broken_ = Status::PeerFailure(why);
      is_broken_.store(true, std::memory_order_release);
    }
  }
  collectives_->Abort();
}

}  // namespace bps
