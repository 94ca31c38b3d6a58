#include "torch/work.h"

#include <algorithm>

namespace byteps_torch {

namespace {

// CUDA outputs get a CUDA-aware Future: completing it records events on the
// completing thread's current stream, and waiting makes the waiter's stream
// wait on them, so nobody blocks the host for a device result.
std::vector<c10::Device> CudaDevicesOf(const std::vector<at::Tensor>& outputs) {
  std::vector<c10::Device> devices;
  for (const auto& t : outputs) {
    if (t.is_cuda() && std::find(devices.begin(), devices.end(), t.device()) == devices.end()) {
      devices.push_back(t.device());
    }
  }
  return devices;
}

}  // namespace

PushPullWork::PushPullWork(int rank, c10d::OpType op_type, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, op_type),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                        CudaDevicesOf(outputs_))) {}

void PushPullWork::synchronize() {
  // Work::wait() calls this once complete: order the caller's current
  // streams after the result (a no-op for host tensors).
  if (!future_->devices().empty()) future_->wait();
}

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
