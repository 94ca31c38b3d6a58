#include "local/staging_warmer.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>

#include "common/logging.h"

namespace bps {

StagingWarmer::StagingWarmer(LocalSharedMemory* shm, bool grows) : shm_(shm), grows_(grows) {
  // What is backed already (the reserve, at start) is mapped before the
  // first call can come: a background pass would compete with it instead.
  while (shm_->MapBacked(kStepBytes) > 0) {
  }
  thread_ = std::thread([this] { Run(); });
}

StagingWarmer::~StagingWarmer() { Stop(); }

void StagingWarmer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool StagingWarmer::Step() {
  if (grows_ && !grow_failed_) {
    ShmControl* c = shm_->control();
    const uint64_t target = c->arena_used.load(std::memory_order_acquire) + shm_->warm_reserve();
    if (shm_->backed_bytes() < target) {
      Status st = shm_->GrowBacked(target, kStepBytes);
      if (!st.ok()) {
        // Not an error yet: no slot needs these pages. A slot that does gets
        // this cause from its own backing, naming the fix.
        BPS_LOG(Debug) << "staging warmer stops growing the pool: " << st.message();
        grow_failed_ = true;
      }
      return true;
    }
  }
  return shm_->MapBacked(kStepBytes) > 0;
}

void StagingWarmer::Run() {
  // Background work: the data path's threads (and the job's) come first. On
  // a busy machine the warmer lags, and the reserve absorbs the lag.
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    const bool worked = Step();
    lock.lock();
    // Idle: look again soon (slots taken from the pool move the bump
    // pointer; another rank's growth moves the front).
    if (!worked) cv_.wait_for(lock, std::chrono::milliseconds(5), [this] { return stop_; });
  }
}

}  // namespace bps
