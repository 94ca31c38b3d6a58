// The engine's data-movement collectives, written once for every adapter
// (the C ABI's bps_gather_bytes_async_on_stream and
// bps_reduce_scatter_async_on_stream): sums whose bytes have places.
// Gather places each rank's bytes at its offset of a zeroed buffer before a
// uint8 sum (exact: x + 0 = x bytewise); reduce-scatter keeps one range of a
// sum. Both are one push_pull of the engine, so they inherit its scheduling,
// partitioning, failure reports and device path.
#pragma once
#include <cstdint>
#include <string>

#include "common/completion.h"
#include "common/reduce_op.h"
#include "common/tensor_view.h"
#include "common/status.h"
#include "core/engine.h"

namespace bps {

// One rank's part of a gather: `input_bytes` bytes at `offset` of the
// `total_bytes` every rank ends with in `output`. `input` may be a region of
// `output` (on a device: exactly this rank's slot, or memory apart from it).
struct GatherBytes {
  const void* input = nullptr;
  int64_t input_bytes = 0;
  int64_t offset = 0;
  void* output = nullptr;
  int64_t total_bytes = 0;
  int32_t device = -1;  // -1: host memory; >= 0: CUDA ordinal (GPU build only)
};

// Places this rank's bytes (host: now; device: queued on `stream`), then
// submits `output` as an in-place uint8 sum. `done` as Engine::Submit's;
// an argument that cannot be placed is refused here, naming it.
Status SubmitGatherBytes(Engine& engine, const GatherBytes& gather, const std::string& name, int32_t priority,
                         void* stream, DoneCallback done, void* user_data);

// Sums `buffer` in place (every rank the same tensor), then copies elements
// [keep_offset, keep_offset + keep_count) of the result into `output`, apart
// from `buffer` on its device; `done` runs after that copy.
Status SubmitReduceScatter(Engine& engine, const TensorView& buffer, int64_t keep_offset, int64_t keep_count,
                           void* output, const std::string& name, int32_t priority, ReduceOp reduce_op, void* stream,
                           DoneCallback done, void* user_data);

}  // namespace bps
