#include "tf/deadline_watcher.h"

#include <thread>
#include <vector>

namespace byteps_native {
namespace tf_adapter {

DeadlineWatcher& DeadlineWatcher::Get() {
  // Never destroyed: its thread may still run while statics are torn down.
  static DeadlineWatcher* watcher = new DeadlineWatcher();
  return *watcher;
}

DeadlineWatcher::DeadlineWatcher() {
  std::thread([this] { Run(); }).detach();
}

DeadlineWatcher::Key DeadlineWatcher::Add(double seconds, std::weak_ptr<Expirable> item) {
  const auto delay = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::lock_guard<std::mutex> lock(mu_);
  Key key{Clock::now() + delay, next_id_++};
  const bool earliest = pending_.empty() || key < pending_.begin()->first;
  pending_.emplace(key, std::move(item));
  if (earliest) wake_.notify_one();
  return key;
}

void DeadlineWatcher::Cancel(const Key& key) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_.erase(key);
}

void DeadlineWatcher::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (pending_.empty()) {
      wake_.wait(lock);
      continue;
    }
    const Clock::time_point next = pending_.begin()->first.first;
    if (Clock::now() < next) {
      wake_.wait_until(lock, next);
      continue;
    }
    std::vector<std::weak_ptr<Expirable>> due;
    const Clock::time_point now = Clock::now();
    while (!pending_.empty() && pending_.begin()->first.first <= now) {
      due.push_back(std::move(pending_.begin()->second));
      pending_.erase(pending_.begin());
    }
    lock.unlock();  // Expire may call Cancel
    for (auto& weak : due) {
      if (auto item = weak.lock()) item->Expire();
    }
    lock.lock();
  }
}

}  // namespace tf_adapter
}  // namespace byteps_native
