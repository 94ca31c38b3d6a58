// A TF kernel's wait on the engine's clock (bps_alarm_after in the C ABI):
// the adapter keeps no clock of its own. `item->Expire()` runs once, on the
// clock's thread, when the time passes, unless Cancel took the alarm back
// first. The item is held weakly: one that is gone by then is skipped.
#ifndef BYTEPS_NATIVE_TF_ENGINE_ALARM_H_
#define BYTEPS_NATIVE_TF_ENGINE_ALARM_H_

#include <cstdint>
#include <memory>
#include <utility>

#include "c_api/byteps_c.h"

namespace byteps_native {
namespace tf_adapter {

template <typename T>
class EngineAlarm {
 public:
  // Not thread-safe: the owner calls Start and Cancel under its own lock.
  void Start(double seconds, std::weak_ptr<T> item) {
    holder_ = new std::weak_ptr<T>(std::move(item));
    id_ = bps_alarm_after(seconds, &Ring, holder_);
  }
  void Cancel() {
    // Taken back before it ran: the holder is still ours. Otherwise Ring
    // owns it (and has deleted it, or will).
    if (id_ != 0 && bps_alarm_cancel(id_)) delete holder_;
    id_ = 0;
    holder_ = nullptr;
  }

 private:
  static void Ring(void* user_data) {
    auto* holder = static_cast<std::weak_ptr<T>*>(user_data);
    if (auto item = holder->lock()) item->Expire();
    delete holder;
  }

  uint64_t id_ = 0;
  std::weak_ptr<T>* holder_ = nullptr;
};

}  // namespace tf_adapter
}  // namespace byteps_native

#endif  // BYTEPS_NATIVE_TF_ENGINE_ALARM_H_
