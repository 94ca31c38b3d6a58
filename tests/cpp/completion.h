// Records the completions of one transport callback (tests only).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "transport/transport.h"

namespace bps {
namespace transport {

// Collects one callback's status.
class Completion {
 public:
  Callback callback() {
    return [this](const Status& st) {
      std::lock_guard<std::mutex> lock(mu_);
      ++calls_;
      status_ = st;
      cv_.notify_all();
    };
  }
  bool Wait(double seconds = 10) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return calls_ > 0; });
  }
  Status status() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }
  int calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int calls_ = 0;
  Status status_;
};

}  // namespace transport
}  // namespace bps
