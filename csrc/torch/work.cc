#include "torch/work.h"

#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>

#include "torch/callback_pool.h"

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
  std::vector<std::function<void(std::exception_ptr)>> listeners;
  {
    std::lock_guard<std::mutex> lock(listeners_mutex_);
    done_ = true;
    error_ = error;
    listeners.swap(listeners_);
  }
  for (auto& listener : listeners) listener(error);
  // A CUDA Future records its events on the completing thread's current
  // streams, which hold the copies back: the pool thread takes them over.
  std::vector<c10::Stream> streams;
  for (const auto& device : future_->devices()) {
    streams.push_back(c10::impl::getDeviceGuardImpl(device.type())->getStream(device));
  }
  CallbackPool::Instance().Run(
      [future = future_, outputs = outputs_, error, streams = std::move(streams)]() {
        c10::MultiStreamGuard guard(streams);
        if (error) {
          future->setError(error);
        } else {
          future->markCompleted(c10::IValue(outputs));
        }
      });
}

void PushPullWork::OnComplete(std::function<void(std::exception_ptr)> then) {
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(listeners_mutex_);
    if (!done_) {
      listeners_.push_back(std::move(then));
      return;
    }
    error = error_;
  }
  then(error);
}

}  // namespace byteps_torch
