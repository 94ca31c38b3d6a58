// One thread that runs callbacks when their time comes: the engine's clock
// for per-op deadlines (core/engine) and, through the C ABI's
// bps_alarm_after, for a face's own waits (TF's local replicas meeting
// before their one submission). One clock, so no face keeps a watcher of its
// own.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

namespace bps {

class AlarmClock {
 public:
  using Clock = std::chrono::steady_clock;
  using Id = uint64_t;

  AlarmClock() = default;
  // Joins its thread; alarms still pending never run.
  ~AlarmClock();
  AlarmClock(const AlarmClock&) = delete;
  AlarmClock& operator=(const AlarmClock&) = delete;

  // `fn` runs once on the clock's thread `seconds` from now, unless Cancel
  // took it back first. It must not block; it may call After and Cancel.
  // Never returns 0. The thread starts with the first alarm.
  Id After(double seconds, std::function<void()> fn);
  // True when the alarm was taken back before it ran (it never will); false
  // when it ran, is running, or never existed.
  bool Cancel(Id id);

 private:
  void Run();

  std::mutex mu_;
  std::condition_variable wake_;
  // By due time, then id: ids grow, so equal times run in order of setting.
  std::map<std::pair<Clock::time_point, Id>, std::function<void()>> pending_;
  std::map<Id, Clock::time_point> due_of_;
  Id next_id_ = 1;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace bps
