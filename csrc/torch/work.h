// The c10d::Work of one byteps collective: finished from the engine's
// callback (through the completion thread), owning a Future whose value is
// the output tensors, as for gloo and NCCL. The Future is completed on the
// CallbackPool, so its callbacks never hold the completion thread.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <exception>
#include <functional>
#include <mutex>
#include <vector>

namespace byteps_torch {

class PushPullWork : public c10d::Work {
 public:
  PushPullWork(int rank, c10d::OpType op_type, std::vector<at::Tensor> outputs);

  // Wakes wait() now and completes the Future (value: `outputs`, or the
  // error) on the CallbackPool, ordered after the calling thread's current
  // CUDA streams. Called exactly once.
  void Complete(std::exception_ptr error);

  // Runs `then` once this work is complete, on the thread that completes it
  // (at once when already complete). For fences: must not block.
  void OnComplete(std::function<void(std::exception_ptr)> then);

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  void synchronize() override;
  std::vector<at::Tensor> result() override { return outputs_; }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::mutex listeners_mutex_;
  bool done_ = false;
  std::exception_ptr error_;
  std::vector<std::function<void(std::exception_ptr)>> listeners_;
};

}  // namespace byteps_torch
