#include "torch/work.h"

namespace byteps_torch {

PushPullWork::PushPullWork(int rank, c10d::OpType op_type, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, op_type),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()))) {}

void PushPullWork::Complete(std::exception_ptr error) {
  // Work state first: a thread woken by the Future may immediately ask
  // isCompleted()/isSuccess().
  finish(error);
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

}  // namespace byteps_torch
