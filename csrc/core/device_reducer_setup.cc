// Device tensors' reducer: made on a rank's first device tensor (its GPU is
// known then), through the engine's factory (EngineOptions), and linked to
// the machine's order channel in the host reducer's shared memory.
#include "common/logging.h"
#include "core/engine.h"

namespace bps {

Status Engine::EnsureDeviceReducer(int device) {
  std::lock_guard<std::mutex> lock(device_mu_);
  if (device_reducer_) {
    if (device == device_) return Status::OK();
    return Status::Invalid("this process pushes GPU tensors from cuda:" + std::to_string(device_) +
                           " but got one on cuda:" + std::to_string(device) +
                           ": byteps runs one GPU per process (the local rank's)");
  }
  DeviceReducerFactory factory = options_.device_reducer;
  if (!factory) {
    return Status::Invalid("it is on CUDA device " + std::to_string(device) +
                           " but this engine was built without CUDA (see `python -m byteps_native.info`)");
  }
  MachineLink link;
  link.order = peers_ ? peers_->order_channel() : nullptr;
  link.ring = [this] { Ring(); };
  link.ring_self = [this] { RingSelf(); };
  DeviceReducer made;
  BPS_RETURN_IF_ERROR(factory(config_, store_.get(), device, link, &made).WithContext(
      "setting up the device reducer among the " + std::to_string(config_.local_size) + " local ranks of machine " +
      std::to_string(config_.worker_id)));
  device_reducer_ = std::move(made.reducer);
  device_liveness_ = std::move(made.liveness);
  device_ = device;
  device_reducer_live_ = device_reducer_.get();
  device_liveness_live_ = device_liveness_.get();
  BPS_LOG(Info) << "device tensors on cuda:" << device << " reduce through '" << device_reducer_->name() << "' among "
                << config_.local_size << " local ranks"
                << (config_.distributed() ? ", then across machines through the servers" : "");
  return Status::OK();
}

bool Engine::DeviceStreamOrdered() const {
  return initialized_ && !config_.distributed() && options_.device_reducer != nullptr;
}

bool Engine::DevicePushPullStreamOrdered() const {
  return initialized_ && options_.device_reducer != nullptr &&
         (!config_.distributed() || config_.gpu_stream_ordered);
}

}  // namespace bps
