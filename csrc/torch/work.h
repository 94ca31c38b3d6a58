// The c10d::Work of one byteps collective: completed from the engine's
// callback (through the completion thread), owning a Future whose value is
// the output tensors, as for gloo and NCCL.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <exception>
#include <vector>

namespace byteps_torch {

class PushPullWork : public c10d::Work {
 public:
  PushPullWork(int rank, c10d::OpType op_type, std::vector<at::Tensor> outputs);

  // Completes the Future (value: `outputs`, or the error) and wakes wait().
  // Called exactly once, on the completion thread.
  void Complete(std::exception_ptr error);

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  void synchronize() override;
  std::vector<at::Tensor> result() override { return outputs_; }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace byteps_torch
