#include "local/shm_reducer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "common/futex.h"
#include "common/logging.h"
#include "common/reduce_kernels.h"
#include "common/partitioner.h"
#include "common/process_alive.h"
#include "local/shm_machine_peers.h"

namespace bps {
namespace {

ShmEntry* Entry(LocalPartition* p) { return reinterpret_cast<ShmEntry*>(p); }

// Rounds counted from the entry's first use (an entry remade after a reclaim
// starts mid-job). The first rank to begin a round of a fresh entry sets it;
// every local rank counts the key's rounds alike, so they agree on it.
uint32_t Relative(ShmEntry* e, uint32_t round) {
  uint32_t base = e->base_round.load(std::memory_order_acquire);
  if (base == kNoBaseRound && e->base_round.compare_exchange_strong(base, round)) base = round;
  return round - base;
}

}  // namespace

Status ShmLocalReducer::Create(const Config& c, Store* store, HostReducer* out) {
  std::unique_ptr<ShmLocalReducer> r(new ShmLocalReducer());
  r->local_rank_ = c.local_rank;
  r->local_size_ = c.local_size;
  r->machine_ = c.worker_id;
  const std::string machine = std::to_string(c.worker_id);
  std::unique_ptr<LocalSharedMemory> shm;
  if (c.local_rank == 0) {
    BPS_RETURN_IF_ERROR(LocalSharedMemory::Create(c.job_id, c.worker_id, c.local_size, 0,
                                                  static_cast<uint32_t>(c.local_key_table_size), &shm));
    r->shm_ = std::move(shm);
    // A quarter of the arena at most: a small /dev/shm (docker's 64 MB)
    // keeps room for the slots themselves.
    const uint64_t wanted = static_cast<uint64_t>(c.local_staging_reserve_bytes) * static_cast<uint64_t>(c.local_size);
    r->shm_->set_warm_reserve(std::min<uint64_t>(wanted, r->shm_->control()->arena_capacity / 4));
    // Backed before the others open, so that each maps it before its first
    // call (StagingWarmer's first pass): a job's very first name is warm too.
    // Not fatal: a slot that cannot be backed later says why, with the fix.
    Status warm = r->shm_->GrowBacked(r->shm_->warm_reserve(), r->shm_->warm_reserve());
    if (!warm.ok()) {
      BPS_LOG(Debug) << "no warm staging pool: " << warm.message();
    }
    BPS_RETURN_IF_ERROR(store->Set("shm/" + machine, r->shm_->base_name()));
  } else {
    std::string name;
    BPS_RETURN_IF_ERROR(store->Get("shm/" + machine, c.rendezvous_timeout_seconds, &name));
    BPS_RETURN_IF_ERROR(LocalSharedMemory::Open(name, c.local_size, &shm));
    r->shm_ = std::move(shm);
  }
  // Joins the machine's group now: a failed start leaves it again.
  std::unique_ptr<MachinePeers> peers(new ShmMachinePeers(r->shm_, c));
  r->warmer_.reset(new StagingWarmer(r->shm_.get(), /*grows=*/c.local_rank == 0));
  int64_t opened = 0;
  BPS_RETURN_IF_ERROR(store->Add("shm_opened/" + machine, 1, &opened));
  if (c.local_rank == 0) {
    // Once everyone has mapped the segments their names can go: nothing is
    // left in /dev/shm even if the job is killed later.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(c.rendezvous_timeout_seconds);
    while (opened < c.local_size) {
      if (std::chrono::steady_clock::now() > deadline) {
        return Status::Timeout("only " + std::to_string(opened) + " of " + std::to_string(c.local_size) +
                               " local ranks opened the shared memory");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      BPS_RETURN_IF_ERROR(store->Add("shm_opened/" + machine, 0, &opened));
    }
    r->shm_->Unlink();
  }
  out->reducer = std::move(r);
  out->peers = std::move(peers);
  return Status::OK();
}

Status ShmLocalReducer::Acquire(uint64_t key, uint64_t bytes, DataType dtype, LocalPartition** out) {
  ShmEntry* e = nullptr;
  Status st = shm_->Hold(key, local_rank_, &e);
  *out = reinterpret_cast<LocalPartition*>(e);
  return st;
}

void ShmLocalReducer::ReleasePartition(LocalPartition* p) { shm_->Release(Entry(p), local_rank_); }

LocalProgress ShmLocalReducer::StageIn(LocalPartition* p, uint32_t round, const LocalContribution& c) {
  ShmEntry* e = Entry(p);
  const int L = local_size_, me = local_rank_;
  if (e->released.load(std::memory_order_acquire) < Relative(e, round) * static_cast<uint32_t>(L)) {
    return LocalProgress::kWaiting;
  }
  // Every rank finished the previous round: nobody reads this rank's slot
  // until it arrives, so it may be (re)allocated for this round's size.
  const size_t esz = DataTypeSize(c.dtype);
  const uint64_t slot_bytes = static_cast<uint64_t>(c.count) * esz;
  idle_slots_.erase(e);  // in a round again: its slot is not idle
  // A new slot takes the warm pages of keys gone idle first (their rounds
  // over on every rank) before the arena grows.
  if (e->slot_bytes[me] < slot_bytes) shm_->FreeIdleSlots(&idle_slots_, me);
  Status slot = shm_->EnsureSlot(e, me, slot_bytes);
  e->signature[me] = c.signature;
  e->tensor_bytes[me] = c.tensor_bytes;
  snprintf(e->shape[me], sizeof(e->shape[me]), "%s %s", DataTypeName(c.dtype), c.shape);
  if (!slot.ok()) {
    // Counted as arrived, so every rank's next step sees the failure.
    FailRound(p, round, Status(slot.code(), "tensor '" + std::string(c.name) + "' on rank " +
                                                std::to_string(machine_ * L + me) + ": " + slot.message()));
  } else {
    for (int q = 0; q < L; ++q) {
      if (q == me) continue;  // the owner reads its own slice in place
      Range s = bps::SliceOf(c.count, L, q);
      if (s.count > 0) memcpy(Slot(e, me) + s.offset * esz, c.input + s.offset * esz, s.count * esz);
    }
  }
  e->arrived.fetch_add(1, std::memory_order_acq_rel);
  shm_->Ring();
  return LocalProgress::kDone;
}

// The failure a local rank wrote into the entry, with its code: a rank that
// lost its server fails the others with a peer failure, not a mismatch.
static Status RoundFailure(const ShmEntry* e) {
  const StatusCode code = static_cast<StatusCode>(e->error_code);
  return Status(code != StatusCode::kOk ? code : StatusCode::kMismatch, std::string(e->error));
}

Status ShmLocalReducer::ReduceOwnSlice(LocalPartition* p, uint32_t round, const LocalContribution& c, char* also_into,
                                       int64_t divisor, LocalProgress* progress) {
  ShmEntry* e = Entry(p);
  const int L = local_size_, me = local_rank_;
  *progress = LocalProgress::kWaiting;
  if (e->error_round.load() == round + 1) return RoundFailure(e);
  if (e->arrived.load(std::memory_order_acquire) < (Relative(e, round) + 1) * static_cast<uint32_t>(L)) {
    return Status::OK();
  }
  for (int q = 0; q < L; ++q) {
    if (e->signature[q] != c.signature || e->tensor_bytes[q] != e->tensor_bytes[me]) {
      std::string msg = "tensor '" + std::string(c.name) + "' has " + e->shape[me] + " on rank " +
                        std::to_string(machine_ * L + me) + " but " + e->shape[q] + " on rank " +
                        std::to_string(machine_ * L + q) + ": every rank must push the same shape and dtype under one name";
      FailRound(p, round, Status::Mismatch(msg));
      return Status::Mismatch(msg);
    }
  }
  const size_t esz = DataTypeSize(c.dtype);
  Range s = bps::SliceOf(c.count, L, me);
  if (s.count > 0) {
    const void* inputs[kMaxLocalRanks];
    int n = 0;
    inputs[n++] = c.input + s.offset * esz;
    for (int q = 0; q < L; ++q) {
      if (q != me) inputs[n++] = PeerSlot(e, q) + s.offset * esz;
    }
    ReduceInputs(inputs, n, static_cast<size_t>(s.count), c.dtype, Slot(e, me) + s.offset * esz,
                 also_into ? also_into + s.offset * esz : nullptr, divisor);
  }
  *progress = LocalProgress::kDone;
  return Status::OK();
}

const char* ShmLocalReducer::PeerSlot(ShmEntry* e, int q) {
  const uint64_t offset = e->slot_offset[q], bytes = e->slot_bytes[q];
  uint64_t& mapped = populated_[offset];
  if (mapped < bytes) {
    shm_->Populate(offset, bytes, /*for_write=*/false);
    mapped = bytes;
  }
  return shm_->arena() + offset;
}

char* ShmLocalReducer::OwnSlice(LocalPartition* p, const LocalContribution& c) {
  Range s = bps::SliceOf(c.count, local_size_, local_rank_);
  return Slot(Entry(p), local_rank_) + s.offset * DataTypeSize(c.dtype);
}

void ShmLocalReducer::PublishOwnSlice(LocalPartition* p, uint32_t round) {
  Entry(p)->ready[local_rank_].store(round + 1, std::memory_order_release);
  shm_->Ring();
}

Status ShmLocalReducer::Gather(LocalPartition* p, uint32_t round, const LocalContribution& c, char* output,
                               int64_t divisor, uint32_t* gathered, LocalProgress* progress) {
  ShmEntry* e = Entry(p);
  const int L = local_size_;
  *progress = LocalProgress::kWaiting;
  if (e->error_round.load() == round + 1) return RoundFailure(e);
  const size_t esz = DataTypeSize(c.dtype);
  for (int q = 0; q < L; ++q) {
    if (*gathered & (1u << q)) continue;
    if (e->ready[q].load(std::memory_order_acquire) < round + 1) continue;
    Range s = bps::SliceOf(c.count, L, q);
    if (s.count > 0) {
      const char* slot = q == local_rank_ ? Slot(e, q) : PeerSlot(e, q);
      CopyScaled(output + s.offset * esz, slot + s.offset * esz, s.count, c.dtype, divisor);
    }
    *gathered |= 1u << q;
  }
  const uint32_t all = (L >= 32) ? 0xffffffffu : ((1u << L) - 1);
  if (*gathered == all) {
    // This rank's slot idles until the key's next round here; it is freed
    // (once every rank released this round) when this rank needs a new one.
    if (e->slot_bytes[local_rank_] > 0) {
      idle_slots_[e] = LocalSharedMemory::IdleSlot{e->key.load(std::memory_order_acquire), Relative(e, round)};
    }
    e->released.fetch_add(1, std::memory_order_acq_rel);
    shm_->Ring();
    *progress = LocalProgress::kDone;
  }
  return Status::OK();
}

void ShmLocalReducer::FailRound(LocalPartition* p, uint32_t round, const Status& why) {
  ShmEntry* e = Entry(p);
  e->error_code = static_cast<int32_t>(why.code());
  snprintf(e->error, sizeof(e->error), "%s", why.message().c_str());
  e->error_round.store(round + 1);
  shm_->Ring();
}

void ShmLocalReducer::CloseFailedRound(LocalPartition* p, uint64_t key, uint64_t bytes, DataType dtype,
                                       uint32_t round, const Status& why, bool staged) {
  ShmEntry* e = Entry(p);
  const bool held_here = e == nullptr;
  if (!e) {
    shm_->Hold(key, local_rank_, &e);
    if (!e) return;  // no entry could be made: no other rank can be waiting in one
  }
  Relative(e, round);  // a fresh entry's first round may be this failed one
  // Fail it for the local ranks too (unless one already did), and count this
  // rank in as a finished round would.
  if (e->error_round.load() < round + 1) {
    e->error_code = static_cast<int32_t>(why.code());
    snprintf(e->error, sizeof(e->error), "%s", why.message().c_str());
    e->error_round.store(round + 1);
  }
  if (!staged) e->arrived.fetch_add(1, std::memory_order_acq_rel);
  e->released.fetch_add(1, std::memory_order_acq_rel);
  if (held_here) shm_->Release(e, local_rank_);
  shm_->Ring();
}

std::string ShmLocalReducer::DescribeStaging(LocalPartition* p, uint32_t round) {
  uint32_t arrived = p ? Entry(p)->arrived.load() - Relative(Entry(p), round) * static_cast<uint32_t>(local_size_) : 0;
  std::string text = std::to_string(arrived) + " of " + std::to_string(local_size_) + " arrived";
  // Which rank is missing is not recorded per round; a stopped one is the
  // likely cause, and the job's only sign of it on this machine (issue 30: a
  // SIGSTOPped torch rank 0 was named by nobody).
  ShmControl* ctl = shm_->control();
  for (int q = 0; q < local_size_; ++q) {
    int pid = ctl->pids[q];
    if (q != local_rank_ && pid > 0 && ProcessStopped(pid)) {
      text += "; local rank " + std::to_string(q) + " (worker rank " + std::to_string(machine_ * local_size_ + q) +
              ", pid " + std::to_string(pid) + ") is stopped (SIGSTOP, or a debugger holds it)";
    }
  }
  return text;
}

}  // namespace bps
