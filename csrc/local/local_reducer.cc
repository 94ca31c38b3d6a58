// Which reducer serves which tensors: host tensors by name (shm), device
// tensors by the factory the CUDA build (or a test) registered.
#include "local/local_reducer.h"

#include <atomic>

#include "local/shm_reducer.h"

namespace bps {
namespace {
std::atomic<DeviceReducerFactory> g_device_reducer_factory{nullptr};
}  // namespace

Status CreateLocalReducer(const std::string& name, const Config& config, Store* store,
                          std::unique_ptr<LocalReducer>* out) {
  if (name == "shm") return ShmLocalReducer::Create(config, store, out);
  return Status::Invalid("unknown local reducer '" + name + "' (this build has: shm)");
}

void SetDeviceReducerFactory(DeviceReducerFactory factory) { g_device_reducer_factory.store(factory); }
DeviceReducerFactory GetDeviceReducerFactory() { return g_device_reducer_factory.load(); }

}  // namespace bps
