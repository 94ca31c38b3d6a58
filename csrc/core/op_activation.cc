// An op taken in by the engine thread: cut into partitions by its reducer's
// plan (or the host plan without one), keyed by name, generation and index,
// given its round, and queued in scheduling order.
#include "common/hashing.h"
#include "core/engine.h"

namespace bps {

using Clock = std::chrono::steady_clock;

void Engine::Activate(std::unique_ptr<TensorOp> op) {
  const size_t esz = DataTypeSize(op->dtype);
  LocalReducer* R = op->reducer;
  const int64_t partition_bytes = config_.PartitionBytesFor(op->device >= 0);
  const std::vector<Range> ranges =
      op->fused ? std::vector<Range>{Range{0, op->count}}
      : R ? R->PlanPartitions(op->count, static_cast<int64_t>(esz), partition_bytes, num_servers_,
                              config_.distinct_local_sizes())
          : PlanPartitions(op->count, static_cast<int64_t>(esz), partition_bytes,
                           NetworkSliceStride(config_.distinct_local_sizes()), num_servers_);
  TensorOp* raw = op.get();
  // After a mismatch every rank uses fresh keys for the name (shared-memory
  // entries, server rounds): the failed round's leftovers cannot block it.
  raw->name_hash = rounds_.KeyedName(raw->name_hash);
  raw->name_op = rounds_.TakeNameOp(raw->name_hash);
  for (size_t i = 0; i < ranges.size(); ++i) {
    auto t = std::make_unique<PartitionTask>();
    t->op = raw;
    t->index = static_cast<uint32_t>(i);
    t->range = ranges[i];
    t->local_key = MixKey(raw->name_hash, t->index, 0xffff);
    t->last_progress = Clock::now();
    if (raw->fused) {
      // Launched at submission: only its completion is left to see.
      t->entry = raw->fused_handle;
      t->stage = Stage::kGather;
    } else {
      t->round = rounds_.TakeRound(t->local_key);
    }
    raw->parts.push_back(std::move(t));
  }
  raw->remaining = static_cast<int>(raw->parts.size());
  // Every machine sends a tensor's partitions in the same order: partition p
  // then completes on its server as early as possible, so replies flow while
  // later pushes are still going out. Consecutive partitions go to different
  // servers (ServerFor), so a credit window of >= servers partitions keeps
  // every server link busy.
  for (auto& t : raw->parts) active_.Insert(PartitionOrder{raw->priority, raw->seq, t->index}, t.get());
  ops_.push_back(std::move(op));
}

}  // namespace bps
