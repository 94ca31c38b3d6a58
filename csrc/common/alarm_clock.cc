#include "common/alarm_clock.h"

#include <vector>

namespace bps {

AlarmClock::~AlarmClock() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

AlarmClock::Id AlarmClock::After(double seconds, std::function<void()> fn) {
  if (seconds < 0) seconds = 0;
  const auto delay = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::lock_guard<std::mutex> lock(mu_);
  const Id id = next_id_++;
  const auto due = Clock::now() + delay;
  const bool earliest = pending_.empty() || due < pending_.begin()->first.first;
  pending_.emplace(std::make_pair(due, id), std::move(fn));
  due_of_.emplace(id, due);
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  if (earliest) wake_.notify_one();
  return id;
}

bool AlarmClock::Cancel(Id id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = due_of_.find(id);
  if (it == due_of_.end()) return false;
  pending_.erase(std::make_pair(it->second, id));
  due_of_.erase(it);
  return true;
}

void AlarmClock::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (pending_.empty()) {
      wake_.wait(lock);
      continue;
    }
    const Clock::time_point next = pending_.begin()->first.first;
    if (Clock::now() < next) {
      wake_.wait_until(lock, next);
      continue;
    }
    std::vector<std::function<void()>> due;
    const Clock::time_point now = Clock::now();
    while (!pending_.empty() && pending_.begin()->first.first <= now) {
      due_of_.erase(pending_.begin()->first.second);
      due.push_back(std::move(pending_.begin()->second));
      pending_.erase(pending_.begin());
    }
    lock.unlock();  // a callback may set or cancel alarms
    for (auto& fn : due) fn();
    lock.lock();
  }
}

}  // namespace bps
