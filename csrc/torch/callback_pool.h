// Where torch Futures of byteps collectives are completed, and so where
// their then()-callbacks run.
//
// Why not on the completion thread: a callback may issue another collective
// and wait for it (DDP's PowerSGD hook does, inside Future.then), and that
// inner collective's completion needs the completion thread. So Futures are
// completed on this pool, which never lets a job wait for a thread: when no
// worker is idle it starts one. Idle workers beyond the first leave after a
// while, so a burst of blocked callbacks does not leave threads behind.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>

namespace byteps_torch {

class CallbackPool {
 public:
  // The process-wide pool, never destroyed (as the completion queue).
  static CallbackPool& Instance();

  // Runs `job` soon on a pool thread; never waits for a busy job to finish.
  void Run(std::function<void()> job);

  // Starts the first worker now if none runs (engine init), so that the
  // first collective does not start a thread: on a busy machine a new
  // thread's first run waits for a scheduling period (issue 27).
  void Prestart();

  // Threads alive now (for tests and diagnostics).
  int threads();

 private:
  CallbackPool() = default;
  void Worker();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  int threads_ = 0;
  int idle_ = 0;      // workers waiting, not yet promised a job
  int promised_ = 0;  // wake-ups handed to idle workers by Run()
};

}  // namespace byteps_torch
