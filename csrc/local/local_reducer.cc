// The default reducers of an engine: shared memory for host tensors, and the
// device factory the CUDA build registered at load time.
#include "local/local_reducer.h"

#include <atomic>

#include "local/shm_reducer.h"

namespace bps {
namespace {
std::atomic<DeviceReducerFactory> g_device_reducer_factory{nullptr};
}  // namespace

Status CreateShmLocalReducer(const Config& config, Store* store, HostReducer* out) {
  return ShmLocalReducer::Create(config, store, out);
}

void SetDeviceReducerFactory(DeviceReducerFactory factory) { g_device_reducer_factory.store(factory); }
DeviceReducerFactory GetDeviceReducerFactory() { return g_device_reducer_factory.load(); }

}  // namespace bps
