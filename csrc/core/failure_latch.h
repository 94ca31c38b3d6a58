// A rank's one failure latch: the first failure (a dead peer, a scheduler
// abort, a timeout, a device error) wins and is what every pending and later
// operation of the rank reports. Set from any thread.
#pragma once
#include <atomic>
#include <mutex>

#include "common/status.h"

namespace bps {

class FailureLatch {
 public:
  // True when this call latched `why` (the first failure).
  bool Set(const Status& why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_) return false;
    why_ = why;
    failed_ = true;
    return true;
  }
  bool failed() const { return failed_.load(); }
  // Why the rank failed; OK while it has not.
  Status status() const {
    std::lock_guard<std::mutex> lock(mu_);
    return failed_ ? why_ : Status::OK();
  }

 private:
  mutable std::mutex mu_;
  Status why_;
  std::atomic<bool> failed_{false};
};

}  // namespace bps
