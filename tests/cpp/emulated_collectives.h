// NCCL's contract, emulated on CPU for the in-process engine tests: the
// local ranks of a machine (threads of this process) share one emulated
// communicator whose n-th collective on every rank is matched with the n-th
// on the others, as NCCL matches them. Where NCCL would hang or mix up
// buffers because two ranks issued different collectives as their n-th,
// the emulation fails every rank's call naming both: the ordering rule of
// csrc/local/local_reducer.h becomes a test that can fail.
//
// "Device" buffers are host memory of the same process; staging is malloc.
#pragma once
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/reduce_kernels.h"
#include "local/collectives.h"
#include "local/sequenced_reducer.h"

namespace bps {
namespace testing_support {

class EmulatedCommunicator {
 public:
  enum Kind { kReduceScatter, kAllGather, kAllReduce };
  struct Ticket {
    std::atomic<bool> done{false};
    std::string error;  // set before done
  };

  explicit EmulatedCommunicator(int local_size) : local_size_(local_size), next_(local_size, 0) {}

  // The machine of `job` (one communicator per machine and job, shared by its ranks).
  static std::shared_ptr<EmulatedCommunicator> For(const std::string& job, int machine, int local_size) {
    static std::mutex mu;
    static std::map<std::string, std::weak_ptr<EmulatedCommunicator>> comms;
    std::lock_guard<std::mutex> lock(mu);
    const std::string id = job + "/" + std::to_string(machine);
    auto comm = comms[id].lock();
    if (!comm) {
      comm = std::make_shared<EmulatedCommunicator>(local_size);
      comms[id] = comm;
    }
    return comm;
  }

  void SetRing(int rank, std::function<void()> ring) {
    std::lock_guard<std::mutex> lock(mu_);
    if (rings_.size() < static_cast<size_t>(local_size_)) rings_.resize(local_size_);
    rings_[rank] = std::move(ring);
  }

  // Rank `rank` issues its next collective; `ticket` completes once every
  // rank issued its counterpart (or fails if they differ).
  void Post(int rank, Kind kind, CollectiveWork* w, std::shared_ptr<Ticket> ticket) {
    std::vector<std::function<void()>> rings;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const uint64_t n = next_[rank]++;
      Call& call = calls_[n];
      if (call.parts.empty()) call.parts.resize(local_size_);
      call.parts[rank] = Part{kind, w, ticket};
      if (++call.posted < local_size_ && broken_.empty()) return;
      if (broken_.empty()) {
        Execute(n, call);
      } else {
        for (auto& p : call.parts) {
          if (!p.ticket) continue;
          p.ticket->error = broken_;
          p.ticket->done = true;
        }
      }
      if (call.posted == local_size_) calls_.erase(n);
      rings = rings_;
    }
    for (auto& ring : rings) {
      if (ring) ring();
    }
  }

  uint64_t order_violations() const { return violations_.load(); }
  int local_size() const { return local_size_; }

  // As NCCL's library: floating point of at most 32 bits is averaged in the
  // reduce-scatter (a machine of one rank: by its own kernel, device_scale.h).
  static bool ScalesAverage(int local_size, DataType dtype) {
    return dtype == DataType::kFloat32 || dtype == DataType::kFloat16 || dtype == DataType::kBFloat16;
  }

  // ncclCommAbort: every collective in flight, and every later one, ends
  // with an error instead of waiting for a peer that will never issue it.
  void Abort(int rank) {
    std::vector<std::function<void()>> rings;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (broken_.empty()) broken_ = "the communicator was aborted by local rank " + std::to_string(rank);
      for (auto& entry : calls_) {
        for (auto& p : entry.second.parts) {
          if (!p.ticket || p.ticket->done) continue;
          p.ticket->error = broken_;
          p.ticket->done = true;
        }
      }
      rings = rings_;
    }
    for (auto& ring : rings) {
      if (ring) ring();
    }
  }

 private:
  struct Part {
    Kind kind = kReduceScatter;
    CollectiveWork* work = nullptr;
    std::shared_ptr<Ticket> ticket;
  };
  struct Call {
    int posted = 0;
    std::vector<Part> parts;
  };

  static const char* KindName(Kind k) {
    return k == kReduceScatter ? "reduce-scatter" : k == kAllGather ? "all-gather" : "all-reduce";
  }

  void Execute(uint64_t n, Call& call) {
    const Part& first = call.parts[0];
    for (int q = 1; q < local_size_; ++q) {
      const Part& p = call.parts[q];
      if (p.kind == first.kind && p.work->key == first.work->key && p.work->round == first.work->round &&
          p.work->count == first.work->count) {
        continue;
      }
      // NCCL would hang here, or sum unrelated buffers.
      broken_ = "collective #" + std::to_string(n) + " differs between local ranks: local rank 0 issued " +
                KindName(first.kind) + " of key " + std::to_string(first.work->key) + " round " +
                std::to_string(first.work->round) + ", local rank " + std::to_string(q) + " " + KindName(p.kind) +
                " of key " + std::to_string(p.work->key) + " round " + std::to_string(p.work->round);
      violations_++;
      for (auto& part : call.parts) {
        part.ticket->error = broken_;
        part.ticket->done = true;
      }
      return;
    }
    const size_t esz = DataTypeSize(first.work->dtype);
    const int64_t slice = first.work->slice;
    if (first.kind == kReduceScatter || first.kind == kAllReduce) {
      const bool all = first.kind == kAllReduce;
      std::vector<char> sum;
      for (int r = 0; r < local_size_; ++r) {
        // Slice r (all-reduce: everything) summed over the ranks' inputs,
        // read in full before any rank's output is written (in place).
        const int64_t off = all ? 0 : std::min(first.work->count, r * slice);
        const int64_t len = all ? first.work->count : std::min(slice, first.work->count - off);
        sum.assign(static_cast<size_t>(len) * esz, 0);
        std::vector<const void*> inputs;
        for (int q = 0; q < local_size_; ++q) inputs.push_back(call.parts[q].work->input + off * esz);
        if (len > 0) {
          ReduceInputs(inputs.data(), local_size_, static_cast<size_t>(len), first.work->dtype, sum.data(), nullptr, 1);
        }
        if (all) {
          if (first.work->divisor > 1) CopyScaled(sum.data(), sum.data(), len, first.work->dtype, first.work->divisor);
          for (int q = 0; q < local_size_; ++q) std::memcpy(call.parts[q].work->output, sum.data(), sum.size());
          break;
        }
        CollectiveWork* owner = call.parts[r].work;
        // NCCL's pre-multiplied sum (ScalesAverage): the average divided here.
        if (ScalesAverage(local_size_, first.work->dtype) && first.work->divisor > 1 && len > 0) {
          CopyScaled(sum.data(), sum.data(), len, first.work->dtype, first.work->divisor);
        }
        std::memcpy(owner->output + off * esz, sum.data(), sum.size());
        // The device-to-host copy of the slice that NCCL's path queues after
        // it; compressed where the slice lives, the payload instead.
        if (owner->own_count > 0 && owner->compression) {
          EncodeSlice(owner, reinterpret_cast<const float*>(owner->output + off * esz));
        } else if (owner->own_count > 0) {
          std::memcpy(owner->staging, owner->output + off * esz, owner->own_count * esz);
        }
      }
    } else {
      for (int r = 0; r < local_size_; ++r) {
        CollectiveWork* dst = call.parts[r].work;
        for (int q = 0; q < local_size_; ++q) {
          if (q == r) continue;
          CollectiveWork* src = call.parts[q].work;
          const int64_t off = std::min(src->count, q * slice);
          if (src->own_count > 0) std::memcpy(dst->output + off * esz, src->output + off * esz, src->own_count * esz);
        }
      }
    }
    for (auto& part : call.parts) part.ticket->done = true;
  }

  // The host codec (compressor.h) in the emulation's "device" memory, as
  // the device codecs run it on a GPU: the state per key, the payload into
  // staging, the answer expanded back into the slice.
  struct KeyState {
    std::vector<float> residual, momentum;
  };
  static KeyState* StateOf(SliceCompression* c) {
    if (!c->state) {
      auto* st = new KeyState();
      if (c->error_feedback) st->residual.assign(c->push.count, 0.0f);
      if (c->momentum) st->momentum.assign(c->push.count, 0.0f);
      c->state = st;
    }
    return static_cast<KeyState*>(c->state);
  }

 public:
  static void EncodeSlice(CollectiveWork* w, const float* slice) {
    SliceCompression* c = w->compression;
    KeyState* st = StateOf(c);
    SliceState state;
    state.cuts = c->cuts.data();
    state.residual = st->residual.empty() ? nullptr : st->residual.data();
    state.momentum = st->momentum.empty() ? nullptr : st->momentum.data();
    state.mu = c->mu;
    state.nesterov = c->nesterov;
    Compress(c->push, slice, state, c->key, w->round, w->staging);
    SlicesEncoded()++;
  }
  static std::atomic<int64_t>& SlicesEncoded() {
    static std::atomic<int64_t> n{0};
    return n;
  }
  static void DecodeAnswer(CollectiveWork* w, float* slice) {
    Decompress(w->staging, w->compression->key, w->round, slice);
  }
  static void Forget(SliceCompression* c) {
    delete static_cast<KeyState*>(c->state);
    c->state = nullptr;
  }
  // Tests turn it on to run the engine's compression-where-the-slice-lives path.
  static std::atomic<bool>& CompressesSlices() {
    static std::atomic<bool> on{false};
    return on;
  }

 private:
  const int local_size_;
  std::mutex mu_;
  std::vector<uint64_t> next_;
  std::map<uint64_t, Call> calls_;
  std::vector<std::function<void()>> rings_;
  std::string broken_;
  std::atomic<uint64_t> violations_{0};
};

class EmulatedCollectives : public Collectives {
 public:
  EmulatedCollectives(std::shared_ptr<EmulatedCommunicator> comm, int local_rank, std::function<void()> ring)
      : comm_(std::move(comm)), rank_(local_rank) {
    comm_->SetRing(rank_, std::move(ring));
  }
  const char* name() const override { return "emulated-nccl"; }

  Status ReduceScatter(CollectiveWork* w) override { return PostPhase(w, EmulatedCommunicator::kReduceScatter); }
  Status Upload(CollectiveWork* w) override {
    const int64_t off = std::min(w->count, static_cast<int64_t>(rank_) * w->slice);
    if (w->own_count > 0 && w->compression) {
      EmulatedCommunicator::DecodeAnswer(w, reinterpret_cast<float*>(w->output + off * DataTypeSize(w->dtype)));
    } else if (w->own_count > 0) {
      std::memcpy(w->output + off * DataTypeSize(w->dtype), w->staging, w->own_count * DataTypeSize(w->dtype));
    }
    return Status::OK();
  }
  bool CompressesSlices(const CodecHeader& push) const override { return EmulatedCommunicator::CompressesSlices(); }
  void ForgetCompression(SliceCompression* c) override { EmulatedCommunicator::Forget(c); }
  Status AllGather(CollectiveWork* w) override { return PostPhase(w, EmulatedCommunicator::kAllGather); }
  Status AllReduce(CollectiveWork* w, void* stream) override { return PostPhase(w, EmulatedCommunicator::kAllReduce); }
  bool ScalesAverage(DataType dtype) const override {
    return EmulatedCommunicator::ScalesAverage(comm_->local_size(), dtype);
  }
  Status Poll(CollectiveWork* w, CollectivePhase phase, bool* done) override {
    *done = false;
    auto* s = static_cast<State*>(w->state);
    if (!s) return Status::OK();
    auto& t = phase == CollectivePhase::kReduced ? s->reduced : s->gathered;
    if (!t || !t->done.load()) return Status::OK();
    if (!t->error.empty()) return Status::Internal(t->error);
    *done = true;
    return Status::OK();
  }
  void Retire(CollectiveWork* w) override {
    delete static_cast<State*>(w->state);
    w->state = nullptr;
  }
  Status AcquireStaging(uint64_t bytes, char** out) override {
    *out = static_cast<char*>(std::malloc(std::max<uint64_t>(bytes, 64)));
    staging_ += bytes;
    return Status::OK();
  }
  void ReleaseStaging(char* buffer) override { std::free(buffer); }
  uint64_t staging_bytes() override { return staging_; }
  Status RecordReady(void* stream, void** event) override {
    *event = nullptr;
    return Status::OK();
  }
  void ReturnReady(void* event) override {}
  // A hold is a token counted open until released, so a test sees each
  // stream-ordered result released once (the emulation has no stream to stop).
  // Tokens live as long as the process (a second release must find its
  // token to count it), owned by one registry so none leaks.
  Status HoldStream(void* stream, void** hold) override {
    static std::mutex mu;
    static std::vector<std::unique_ptr<std::atomic<int>>> tokens;
    std::lock_guard<std::mutex> lock(mu);
    tokens.push_back(std::make_unique<std::atomic<int>>(0));
    *hold = tokens.back().get();
    HoldsOpened()++;
    return Status::OK();
  }
  void ReleaseHold(void* hold) override {
    auto* token = static_cast<std::atomic<int>*>(hold);
    if (token->fetch_add(1) != 0) HoldsReleasedTwice()++;
    HoldsReleased()++;
  }
  static std::atomic<int64_t>& HoldsOpened() {
    static std::atomic<int64_t> n{0};
    return n;
  }
  static std::atomic<int64_t>& HoldsReleased() {
    static std::atomic<int64_t> n{0};
    return n;
  }
  static std::atomic<int64_t>& HoldsReleasedTwice() {
    static std::atomic<int64_t> n{0};
    return n;
  }
  void Abort() override { comm_->Abort(rank_); }

 private:
  struct State {
    std::shared_ptr<EmulatedCommunicator::Ticket> reduced, gathered;
  };
  Status PostPhase(CollectiveWork* w, EmulatedCommunicator::Kind kind) {
    if (!w->state) w->state = new State();
    auto* s = static_cast<State*>(w->state);
    auto ticket = std::make_shared<EmulatedCommunicator::Ticket>();
    (kind == EmulatedCommunicator::kReduceScatter ? s->reduced : s->gathered) = ticket;
    comm_->Post(rank_, kind, w, ticket);
    return Status::OK();
  }

  std::shared_ptr<EmulatedCommunicator> comm_;
  const int rank_;
  std::atomic<uint64_t> staging_{0};
};

// The device reducer factory of the tests: the sequenced reducer over the
// emulation, in the order mode the test chose.
inline CollectiveOrder::Mode& EmulatedOrderMode() {
  static CollectiveOrder::Mode mode = CollectiveOrder::Mode::kMachineOrder;
  return mode;
}

inline Status MakeEmulatedDeviceReducer(const Config& config, Store* store, int device, const MachineLink& link,
                                        DeviceReducer* out) {
  auto comm = EmulatedCommunicator::For(config.job_id, config.worker_id, config.local_size);
  std::unique_ptr<Collectives> collectives(new EmulatedCollectives(comm, config.local_rank, link.ring_self));
  return MakeSequencedReducer(config, std::move(collectives), link, out, EmulatedOrderMode());
}

}  // namespace testing_support
}  // namespace bps
