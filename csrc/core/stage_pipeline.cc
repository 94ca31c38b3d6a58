// The stage machine of a partition, as data: kPipeline says which step runs
// in each stage (BytePS keeps its pipeline as a list of queues). A step
// either waits (nothing possible yet) or moves: it did work, and sets the
// next stage when its own is complete. Host and device partitions take the
// same steps; what differs is the op's LocalReducer.

#include "common/hashing.h"
#include "common/logging.h"
#include "common/steady_ns.h"
#include "common/reduce_kernels.h"
#include "core/engine.h"

namespace bps {
const char* StageName(Stage stage) {
  switch (stage) {
    case Stage::kWaitTurn: return "wait_turn";
    case Stage::kStage: return "stage_in";
    case Stage::kReduce: return "local_reduce";
    case Stage::kPush: return "push";
    case Stage::kAwait: return "await";
    case Stage::kGather: return "gather";
    case Stage::kDone: return "done";
  }
  return "?";
}

// Indexed by Stage.
const Engine::StageStep Engine::kPipeline[] = {
    {Stage::kWaitTurn, &Engine::WaitTurn},   {Stage::kStage, &Engine::StageIn},
    {Stage::kReduce, &Engine::ReduceLocally}, {Stage::kPush, &Engine::Push},
    {Stage::kAwait, &Engine::AwaitAnswer},    {Stage::kGather, &Engine::Gather},
};

LocalContribution Engine::ContributionOf(const TensorOp& op, const PartitionTask* t) const {
  const size_t esz = DataTypeSize(op.dtype);
  const Range range = t ? t->range : Range{0, op.count};
  LocalContribution c;
  c.input = op.input + range.offset * esz;
  c.output = op.output + range.offset * esz;
  c.count = range.count;
  c.dtype = op.dtype;
  c.signature = op.signature;
  c.tensor_bytes = static_cast<uint64_t>(op.count) * esz;
  c.name = op.name.c_str();
  c.shape = op.shape_and_op.c_str();
  c.divisor = op.average ? config_.size() : 1;
  c.device = op.device;
  c.ready_event = op.ready_event;
  c.priority = op.priority;
  c.submit_seq = op.seq;
  c.partition = t ? t->index : 0;
  return c;
}

bool Engine::Advance(PartitionTask& t) {
  bool moved = false;
  while (t.stage != Stage::kDone && !t.op->failed) {
    const Stage before = t.stage;
    const StageStep& step = kPipeline[static_cast<int>(t.stage)];
    const Step result = (this->*step.run)(t);
    moved |= result == Step::kMoved;
    if (result == Step::kWait || t.stage == before) break;
  }
  return moved;
}

Engine::Step Engine::WaitTurn(PartitionTask& t) {
  TensorOp* op = t.op;
  // Rounds of one key run in submission order on this rank.
  if (!rounds_.IsTurnOf(t.local_key, t.round)) return Step::kWait;
  if (LocalReducer* R = op->reducer) {
    Status st = R->Acquire(t.local_key, t.range.count * DataTypeSize(op->dtype), op->dtype, &t.entry);
    if (!st.ok()) {
      st = Status(st.code(), "tensor '" + op->name + "' (" + DataTypeName(op->dtype) + " " + op->shape +
                                 " on rank " + std::to_string(rank()) + ") partition " + std::to_string(t.index) +
                                 ": " + st.message());
      // make the other local ranks fail too, not time out
      if (t.entry) R->FailRound(t.entry, t.round, st);
      FailOp(op, st);
      return Step::kMoved;
    }
    // Every entry is in use by partitions in flight: they finish (on this
    // rank and the others) and free one; the watchdog bounds the wait.
    if (!t.entry) return Step::kWait;
  }
  t.stage = Stage::kStage;
  return Step::kMoved;
}

Engine::Step Engine::StageIn(PartitionTask& t) {
  TensorOp* op = t.op;
  LocalReducer* R = op->reducer;
  if (!R) {
    t.stage = config_.distributed() ? Stage::kPush : Stage::kGather;
    return Step::kMoved;
  }
  const uint64_t t0 = SteadyNowNs();
  const uint64_t w0 = timeline_.Tracing(t.round) ? Timeline::NowMicros() : 0;
  LocalContribution c = ContributionOf(*op, &t);
  c.compression = SliceCompressionFor(*op, t);
  if (R->StageIn(t.entry, t.round, c) == LocalProgress::kWaiting) return Step::kWait;
  stats_.stage_ns += SteadyNowNs() - t0;
  if (w0) timeline_.Record(op->name, t.index, t.round, "stage_in", w0, Timeline::NowMicros());
  t.staged = true;
  t.stage = Stage::kReduce;
  return Step::kMoved;
}

Engine::Step Engine::ReduceLocally(PartitionTask& t) {
  TensorOp* op = t.op;
  LocalReducer* R = op->reducer;
  const bool distributed = config_.distributed();
  const uint64_t t0 = SteadyNowNs();
  const uint64_t w0 = timeline_.Tracing(t.round) ? Timeline::NowMicros() : 0;
  LocalContribution mine = ContributionOf(*op, &t);
  LocalProgress progress;
  Status st = R->ReduceOwnSlice(t.entry, t.round, mine, distributed ? nullptr : mine.output, mine.divisor, &progress);
  if (!st.ok()) {
    FailOp(op, st);
    return Step::kMoved;
  }
  if (progress == LocalProgress::kWaiting) return Step::kWait;
  stats_.local_reduce_ns += SteadyNowNs() - t0;
  if (w0) timeline_.Record(op->name, t.index, t.round, "local_reduce", w0, Timeline::NowMicros());
  if (distributed) {
    t.stage = Stage::kPush;
  } else {
    R->PublishOwnSlice(t.entry, t.round);
    t.gathered_mask |= 1u << config_.local_rank;
    t.stage = Stage::kGather;
  }
  return Step::kMoved;
}

// The network slices this rank pushes for a partition of n elements: with
// equal machines its one local slice; with machines of different sizes the
// job's network slices inside its local slice (every machine derives the same
// slices, so the servers add one contribution per machine per slice).
void Engine::PlanPushes(PartitionTask& t) {
  TensorOp* op = t.op;
  LocalReducer* R = op->reducer;
  const int64_t n = t.range.count;
  const std::vector<int> sizes = config_.distinct_local_sizes();
  const int stride = NetworkSliceStride(sizes);
  const Range own = R ? R->SliceOf(n, config_.local_rank) : Range{0, n};
  std::vector<Range> slices;
  if (R) {
    slices = NetworkSlices(n, sizes, [R](int64_t count, int L, int q) { return R->SliceOfLayout(count, L, q); });
  } else {
    slices = NetworkSlices(n, sizes, [](int64_t count, int L, int q) { return SliceOf(count, L, q); });
  }
  t.pushes.clear();
  t.pushes_sent = 0;
  for (size_t i = 0; i < slices.size(); ++i) {
    const Range& s = slices[i];
    // An empty tensor's one (empty) slice: pushed by local rank 0 of each machine.
    const bool mine = sizes.size() == 1 ? static_cast<int>(i) == (R ? config_.local_rank : 0)
                      : n == 0          ? config_.local_rank == 0
                                        : s.offset >= own.offset && s.offset + s.count <= own.offset + own.count;
    if (!mine || (s.count == 0 && n > 0)) continue;  // an empty slice is empty everywhere: nothing to send
    NetworkPush push;
    push.slice = s;
    push.key = MixKey(op->name_hash, t.index, static_cast<uint32_t>(i));
    push.server = ServerFor(op->name_hash, t.index, static_cast<int>(i), stride, num_servers_);
    t.pushes.push_back(push);
  }
}

Engine::Step Engine::Push(PartitionTask& t) {
  TensorOp* op = t.op;
  LocalReducer* R = op->reducer;
  const size_t esz = DataTypeSize(op->dtype);
  // Planned once: a partition refused credit comes back every pass until
  // its lane drains, and with a 64 MB tensor in 256 KB partitions hundreds
  // of them wait at once (issue 38: planning, and reading each one's
  // shared-memory entry, in every pass made the engine's cost per op grow
  // with the square of its partitions). An empty plan moves the partition
  // on below, so an empty `pushes` here means not planned yet.
  if (t.pushes.empty()) PlanPushes(t);
  if (t.pushes.empty()) {
    if (t.entry) R->PublishOwnSlice(t.entry, t.round);
    t.stage = Stage::kGather;
    return Step::kMoved;
  }
  // Its lane refused an earlier partition in this pass: this one would be
  // refused too, so nothing of it is touched (the entry lives in memory the
  // other local ranks write, a cache miss per read).
  if (credits_.Refusing(credits_.LaneOf(t.pushes[t.pushes_sent].server))) return Step::kWait;
  // Several local ranks: the reducer's own slice, answered in place; one:
  // straight from the input into the output.
  LocalContribution mine = ContributionOf(*op, &t);
  const int64_t own_offset = R ? R->SliceOf(t.range.count, config_.local_rank).offset : 0;
  const char* own_data = t.entry ? R->OwnSlice(t.entry, mine) : mine.input;
  char* own_dst = t.entry ? R->OwnSlice(t.entry, mine) : mine.output;
  if (t.pushes_sent == 0) t.net_start_us = timeline_.Tracing(t.round) ? Timeline::NowMicros() : 0;
  // Moved only if this call sent something: claiming progress for a refused
  // push would keep the engine from sleeping until its lane drains.
  const size_t sent_before = t.pushes_sent;
  while (t.pushes_sent < t.pushes.size()) {
    NetworkPush& push = t.pushes[t.pushes_sent];
    const Range& s = push.slice;
    const uint64_t raw_bytes = static_cast<uint64_t>(s.count) * esz;
    CompressedSlice* z = CompressionFor(*op, push.key, static_cast<uint64_t>(t.range.offset + s.offset),
                                        static_cast<uint64_t>(s.count));
    const uint64_t bytes = z ? z->wire_bytes : raw_bytes;
    const int lane = credits_.LaneOf(push.server);
    const uint64_t charge = config_.CreditCharge(bytes, op->device >= 0);
    if (!credits_.TryAdmit(lane, charge)) return t.pushes_sent > sent_before ? Step::kMoved : Step::kWait;
    const size_t within = static_cast<size_t>(s.offset - own_offset) * esz;
    PushRequest r;
    r.key = push.key;
    r.server = push.server;
    r.name_hash = op->name_hash;
    r.round = t.round;
    r.partition = t.index;
    r.dtype = op->dtype;
    r.average = op->average;
    r.signature = op->signature;
    r.tensor_bytes = static_cast<uint64_t>(op->count) * esz;
    r.partition_bytes = config_.PartitionBytesFor(op->device >= 0);
    r.data = own_data + within;
    r.dst = own_dst + within;
    r.bytes = bytes;
    r.io = t.io;
    push.compressed = z;
    if (z && z->on_reducer && t.entry) {
      // The reducer compressed the slice where it lives: the staging holds
      // the payload, and the answer goes back into it compressed, for the
      // reducer to expand there (SliceCompression).
      r.answer_bytes = z->answer_bytes;
      r.compressed = true;
      push.answer_dst = nullptr;
      stats_.pushes_compressed_on_reducer++;
      stats_.compressed_pushes++;
      stats_.bytes_before_compression += raw_bytes;
    } else if (z) {
      // The slice (this machine's sum) plus what earlier steps dropped; the
      // answer comes compressed into the slot and is decompressed on arrival.
      Compress(z->codec, reinterpret_cast<const float*>(r.data), z->State(op->compression), r.key, t.round,
               z->send.data());
      push.answer_dst = r.dst;
      r.data = z->send.data();
      r.dst = z->answer.data();
      r.answer_bytes = z->answer_bytes;
      r.compressed = true;
      stats_.compressed_pushes++;
      stats_.bytes_before_compression += raw_bytes;
    }
    stats_.bytes_pushed += bytes;
    if (push.server < EngineStats::kMaxTrackedServers) stats_.bytes_per_server[push.server] += bytes;
    push.pull = servers_->Push(r, [this, lane, charge, admitted_ns = SteadyNowNs()] {
      stats_.receipt_ns.fetch_add(SteadyNowNs() - admitted_ns, std::memory_order_relaxed);
      stats_.receipts.fetch_add(1, std::memory_order_relaxed);
      return credits_.Release(lane, charge);
    });
    ++t.pushes_sent;
  }
  t.stage = Stage::kAwait;
  return Step::kMoved;
}

Engine::Step Engine::AwaitAnswer(PartitionTask& t) {
  TensorOp* op = t.op;
  for (const NetworkPush& push : t.pushes) {
    const int state = push.pull->state.load(std::memory_order_acquire);
    if (state == 0) return Step::kWait;
    if (state == 2) {
      op->mismatch_from_server = true;
      FailOp(op, Status(push.pull->error_code, "tensor '" + op->name + "' (" + DataTypeName(op->dtype) + " " +
                                                   op->shape + " on rank " + std::to_string(rank()) +
                                                   "): " + push.pull->error));
      return Step::kMoved;
    }
  }
  // The pushes' on_sent may still be pending: the input is read until then.
  if (t.io->in_flight.load(std::memory_order_acquire) != 0) return Step::kWait;
  for (const NetworkPush& push : t.pushes) {
    stats_.bytes_pulled += push.pull->bytes;
    if (push.compressed && push.answer_dst) {
      Decompress(push.compressed->answer.data(), push.key, t.round, reinterpret_cast<float*>(push.answer_dst));
    }
  }
  if (t.net_start_us) timeline_.Record(op->name, t.index, t.round, "push_pull", t.net_start_us, Timeline::NowMicros());
  if (t.entry) op->reducer->PublishOwnSlice(t.entry, t.round);
  t.stage = Stage::kGather;
  return Step::kMoved;
}

Engine::Step Engine::Gather(PartitionTask& t) {
  TensorOp* op = t.op;
  LocalReducer* R = op->reducer;
  const uint64_t t0 = SteadyNowNs();
  // A fused op (one machine) has no rounds: its step on the timeline is how
  // many ops of its name came before it.
  const uint32_t step = op->fused ? op->name_op : t.round;
  const uint64_t w0 = timeline_.Tracing(step) ? Timeline::NowMicros() : 0;
  LocalContribution mine = ContributionOf(*op, &t);
  if (!R) {
    if (config_.distributed()) {
      if (mine.divisor != 1) CopyScaled(mine.output, mine.output, t.range.count, op->dtype, mine.divisor);
    } else {
      CopyScaled(mine.output, mine.input, t.range.count, op->dtype, mine.divisor);
    }
    stats_.gather_ns += SteadyNowNs() - t0;
    if (w0) timeline_.Record(op->name, t.index, step, "gather", w0, Timeline::NowMicros());
    FinishPartition(t);
    return Step::kMoved;
  }
  const uint32_t before = t.gathered_mask;
  LocalProgress progress;
  Status st = R->Gather(t.entry, t.round, mine, mine.output, mine.divisor, &t.gathered_mask, &progress);
  if (!st.ok()) {
    FailOp(op, st);
    return Step::kMoved;
  }
  const bool moved = t.gathered_mask != before || progress == LocalProgress::kDone;
  stats_.gather_ns += SteadyNowNs() - t0;
  if (w0 && moved) timeline_.Record(op->name, t.index, step, "gather", w0, Timeline::NowMicros());
  if (progress == LocalProgress::kDone) FinishPartition(t);
  return moved ? Step::kMoved : Step::kWait;
}

void Engine::FinishPartition(PartitionTask& t) {
  t.stage = Stage::kDone;
  TensorOp* op = t.op;
  if (t.entry) op->reducer->ReleasePartition(t.entry);
  t.entry = nullptr;
  if (!op->fused) rounds_.Close(t.local_key, t.round);
  stats_.partitions_completed++;
  if (--op->remaining == 0 && !op->failed) {
    stats_.ops_completed++;
    stats_.queue_depth--;
    if (op->ready_event) op->reducer->ReturnReady(op->ready_event);
    op->ready_event = nullptr;
    ReleaseResultHold(op);
    if (op->deadline_alarm) alarms_.Cancel(op->deadline_alarm);
    op->done(op->user_data, static_cast<int>(StatusCode::kOk), "");
  }
}

}  // namespace bps
