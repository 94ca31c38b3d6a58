// Tensor fusion: many push_pulls in one call, each with its own name,
// priority, output and completion, sent as few engine operations.
//
// The group is packed by PlanFusion (core/fusion_plan.h): host tensors of one
// dtype, reduce op and declared compression share buckets of at most
// `fusion_bytes`; a compressed bucket is declared with that compression and a
// segment per member, so onebit keeps a scale per tensor (as a DDP bucket's
// parameters do). A tensor in device memory, or whose compression has
// segments of its own, travels alone under its own name, exactly as a
// push_pull of it would. A bucket is one engine operation over a packed copy
// of its members; when it completes, each member gets its part of the result
// in its own output, then its own done().
//
// Each tensor keeps its semantics:
//  - its result is its own push_pull's (sums of bytes at the same offsets of
//    the same dtype; an average divides each element alike);
//  - its completion is its own callback, once, errors included: a bucket's
//    failure reaches every member, naming the member and the bucket;
//  - a mismatch names the user's tensor: a bucket whose ranks disagree (its
//    signature covers every member's shape) fails as a mismatch on every
//    rank, and every rank then resubmits that bucket's members alone, so the
//    member that differs fails with its own name and the usual words while
//    the others complete normally.
// Ranks whose groups pack differently (a member's size on one rank moves a
// bucket boundary) meet under different bucket names and wait until
// BYTEPS_TIMEOUT, whose message names the bucket's first and last member.
#pragma once
#include <string>
#include <vector>

#include "common/completion.h"
#include "common/reduce_op.h"
#include "common/status.h"
#include "common/tensor_view.h"
#include "core/engine.h"

namespace bps {

struct GroupMember {
  TensorView input;
  void* output = nullptr;  // may be input.data: in place
  std::string name;
  int32_t priority = 0;
  ReduceOp reduce_op = ReduceOp::kSum;
  DoneCallback done = nullptr;
  void* user_data = nullptr;
};

struct GroupOptions {
  // Bytes per bucket; <= 0: no fusion (every member alone).
  int64_t fusion_bytes = Config::kDefaultFusionBytes;
  // Device members (travelling alone) are ordered after this stream's work.
  void* stream = nullptr;
  // > 0: every engine operation of the group gets this deadline.
  double timeout_seconds = 0;
};

// What one group submission became (tests and counters).
struct GroupReport {
  int operations = 0;     // engine operations submitted
  int fused_members = 0;  // members that travel in a bucket of several
};

// Returns OK when the group was accepted: every member's done() then runs
// exactly once, never inside this call. Otherwise nothing was accepted and no
// done() runs (a member fails validation, or the engine is not running).
Status SubmitGroup(Engine& engine, const std::vector<GroupMember>& members, const GroupOptions& options,
                   GroupReport* report = nullptr);

}  // namespace bps
