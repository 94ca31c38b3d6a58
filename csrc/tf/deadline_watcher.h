// Per-op deadlines for the TF adapter (CommunicationOptions.timeout_seconds).
//
// Why here and not in the engine: the C API (c_api/byteps_c.h) has no per-op
// deadline and no cancel call; its only clock is BYTEPS_TIMEOUT, which fails
// the whole job. So the adapter keeps its own clock: one thread sleeps until
// the earliest registered deadline and calls the op's `Expire`, which
// finishes the TensorFlow op with DeadlineExceeded while the engine keeps the
// buffers it was given (the op holds references to them until the engine's
// own callback, so the engine never writes into memory TensorFlow reuses).
#ifndef BYTEPS_NATIVE_TF_DEADLINE_WATCHER_H_
#define BYTEPS_NATIVE_TF_DEADLINE_WATCHER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

namespace byteps_native {
namespace tf_adapter {

// Something that can run out of time. Expire runs on the watcher's thread and
// must not block.
class Expirable {
 public:
  virtual ~Expirable() = default;
  virtual void Expire() = 0;
};

class DeadlineWatcher {
 public:
  using Clock = std::chrono::steady_clock;
  using Key = std::pair<Clock::time_point, uint64_t>;

  // The process-wide watcher (its thread starts on first use, never stops).
  static DeadlineWatcher& Get();

  // `item->Expire()` runs once `seconds` have passed unless Cancel(key) ran
  // first. The watcher keeps only a weak reference: an item that is gone by
  // then is skipped.
  Key Add(double seconds, std::weak_ptr<Expirable> item);
  void Cancel(const Key& key);

 private:
  DeadlineWatcher();
  void Run();

  std::mutex mu_;
  std::condition_variable wake_;
  std::map<Key, std::weak_ptr<Expirable>> pending_;
  uint64_t next_id_ = 0;
};

}  // namespace tf_adapter
}  // namespace byteps_native

#endif  // BYTEPS_NATIVE_TF_DEADLINE_WATCHER_H_
