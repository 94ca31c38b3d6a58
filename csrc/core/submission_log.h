// Every operation this process's engine accepted, numbered in submission
// order, for Horovod's join() (byteps_native/join_protocol.py): a rank that
// has joined stands in, with zeros, for the operations the others still
// submit, and learns them from the others' logs. Kept here, where every face's
// submissions pass, so that no face keeps a log of its own (TF's ops inside
// tf.function and TF 1 graphs are seen as they run, not as they are traced).
// One per process (c_api/process_engine owns it), across engine restarts.
#pragma once
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/reduce_op.h"

namespace bps {

struct Submission {
  std::string name;
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;
  int32_t priority = 0;
  ReduceOp reduce_op = ReduceOp::kSum;
  int32_t device = -1;  // -1: host memory; else the CUDA ordinal
  // A group submission (core/fused_group.h) is one entry: its members, and
  // the fusion limit they were packed under. A joined rank stands in with the
  // same group, so its buckets carry the same names and signatures.
  bool group = false;
  int64_t fusion_bytes = 0;
  std::vector<Submission> members;
};

class SubmissionLog {
 public:
  // A rank that joins late asks for the others' submissions since its own
  // count; that many are kept (a few MB of names at most).
  static constexpr size_t kKept = 1 << 17;

  void Record(Submission submission);
  // How many were recorded in all.
  int64_t count() const;
  // Submission `index` as one line of text, "dtype reduce_op priority device
  // ndim dims... name" (dtype: a DataType value); a group as the line "group
  // fusion_bytes count" and then one such line per member, each after a
  // newline. False when `index` was never recorded or is no longer kept.
  bool Line(int64_t index, std::string* line) const;

 private:
  mutable std::mutex mu_;
  std::deque<Submission> kept_;
  int64_t count_ = 0;  // kept_.front() is number count_ - kept_.size()
};

}  // namespace bps
