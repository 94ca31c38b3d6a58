// The single path from torch into the engine: submit one push_pull of a wire
// tensor (or the engine's gather / reduce-scatter of it) and run a handler on
// the adapter's completion thread when it ends.
#pragma once

#include <ATen/ATen.h>

#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "c_api/byteps_c.h"

namespace byteps_torch {

// Called on the completion thread with nullptr on success, else an exception
// (a c10::Error whose text names the tensor, the status and the engine's
// message). The handler must not throw.
using PushPullDone = std::function<void(std::exception_ptr error)>;

// Submits `wire` (contiguous, engine dtype) for an in-place push_pull. A CUDA
// `wire` is ordered after the work already queued on the device's current
// stream, as NCCL collectives are; the current stream itself never waits for
// the result (consumers wait through the Future's CUDA events).
// `shape_for_errors`: pass the user-visible shape so the engine can name it
// in mismatch errors, or an empty tensor to describe `wire` as 1-D.
// Throws c10::Error when the engine refuses the submission (then `done` is
// never called). Keeps `wire` alive until `done` has run.
void SubmitPushPull(const at::Tensor& wire, const std::string& name, int32_t priority,
                    bps_reduce_op reduce_op, c10::IntArrayRef shape_for_errors,
                    PushPullDone done);

// One tensor of a group submission (SubmitPushPullGroup).
struct GroupedPushPull {
  at::Tensor wire;  // contiguous, engine dtype, host memory
  std::string name;
  int32_t priority = 0;
  std::vector<int64_t> shape;  // the user-visible shape, for mismatch errors
  PushPullDone done;
};

// As SubmitPushPull, for many host tensors in one engine call
// (bps_push_pull_group_async: the engine fuses them into buckets of at most
// `fusion_bytes`, < 0: BYTEPS_FUSION_BYTES). Each member's `done` runs once
// with its own outcome. Throws c10::Error when the engine refuses the group
// (then no `done` runs).
void SubmitPushPullGroup(std::vector<GroupedPushPull> members, bps_reduce_op reduce_op, int64_t fusion_bytes);

// As SubmitPushPull, for the engine's gather (csrc/core/placed_sum.h):
// `output` (contiguous uint8, CPU or CUDA) ends with every rank's bytes in
// rank order, this rank's `input` (contiguous uint8 on output's device; may
// be output's own slot) at byte `offset`. Keeps both alive until `done`.
void SubmitGatherBytes(const at::Tensor& input, int64_t offset, const at::Tensor& output, const std::string& name,
                       int32_t priority, PushPullDone done);

// As SubmitPushPull, for the engine's reduce-scatter: `buffer` (contiguous,
// engine dtype; every rank the same shape) is summed in place and elements
// [offset, offset + output.numel()) of the result land in `output`
// (contiguous, same dtype and device, apart from `buffer`).
void SubmitReduceScatter(const at::Tensor& buffer, int64_t offset, const at::Tensor& output, const std::string& name,
                         int32_t priority, bps_reduce_op reduce_op, PushPullDone done);

// How a named collective reaches the engine: one of the three above with
// its tensors bound, given the engine name and priority it runs under.
using EngineSubmission = std::function<void(const std::string& name, int32_t priority, PushPullDone done)>;

// "BPS_PEER_FAILURE" and so on, for messages.
const char* StatusName(int status);

}  // namespace byteps_torch
