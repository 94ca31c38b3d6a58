// Tensor fusion's plan: which tensors of one group submission share a bucket.
//
// Small tensors cost more in per-operation overhead (a round per partition,
// a server round trip, a shared-memory entry) than in bytes, so a group's
// tensors of one dtype and reduce op travel as one bucket of at most the
// fusion limit (BYTEPS_FUSION_BYTES). The plan is a pure function of what
// every rank submits in the same call, so every rank packs the same buckets
// (the buckets' names, FusedBucketName, then meet across ranks as a tensor's
// name does).
//
// Priority order holds: tensors are taken highest priority first, and a
// bucket runs at the priority of its highest member, so fusing never puts a
// tensor behind a lower-priority one; it only takes lower-priority tensors
// along in the same bucket (at most the fusion limit of bytes).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/reduce_op.h"

namespace bps {

// What the plan knows of one tensor of the group.
struct FusionCandidate {
  DataType dtype = DataType::kFloat32;
  ReduceOp reduce_op = ReduceOp::kSum;
  int64_t bytes = 0;
  int32_t priority = 0;
  // Travels alone whatever its size: one in device memory, or one whose
  // declared compression already has segments of its own (a DDP bucket).
  bool alone = false;
  // Its declared compression, as a class of the group (0: none): tensors
  // share a bucket only with tensors of the same class, and a compressed
  // bucket keeps one segment per member (onebit: a scale per tensor).
  int compression = 0;
};

struct FusionBucket {
  std::vector<size_t> members;  // indices into the group, highest priority first
  int32_t priority = 0;         // its first (highest) member's
};

// Buckets in scheduling order (highest priority first; equal priorities in
// the group's order). A tensor of at least `limit` bytes, or any with
// `limit` <= 0, is a bucket of its own.
std::vector<FusionBucket> PlanFusion(const std::vector<FusionCandidate>& group, int64_t limit);

// The engine name of a bucket of several tensors: the same on every rank that
// fuses the same names under the same dtype and reduce op, and different for
// any other member list, so a bucket never meets a differently packed one.
// Readable: "fused.<hash>[first..last x3]".
std::string FusedBucketName(const std::vector<std::string>& member_names, DataType dtype, ReduceOp reduce_op);

// What the ranks compare for a bucket instead of its length (its members'
// shapes, in order): a member of another shape on one rank then fails the
// bucket as a mismatch even when the bucket's bytes agree.
std::string FusedBucketShape(const std::vector<std::string>& member_shapes);

}  // namespace bps
