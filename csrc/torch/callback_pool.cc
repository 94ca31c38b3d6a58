#include "torch/callback_pool.h"

#include <chrono>
#include <cstdio>
#include <exception>
#include <thread>

namespace byteps_torch {
namespace {
constexpr auto kIdleExit = std::chrono::seconds(30);
}  // namespace

CallbackPool& CallbackPool::Instance() {
  static CallbackPool* pool = new CallbackPool();
  return *pool;
}

int CallbackPool::threads() {
  std::lock_guard<std::mutex> lock(mutex_);
  return threads_;
}

void CallbackPool::Run(std::function<void()> job) {
  std::lock_guard<std::mutex> lock(mutex_);
  jobs_.push_back(std::move(job));
  if (idle_ > 0) {
    // Promise this job to one idle worker: a worker busy in a blocked job is
    // never counted on.
    --idle_;
    ++promised_;
    wake_.notify_one();
    return;
  }
  ++threads_;
  std::thread([this] { Worker(); }).detach();
}

void CallbackPool::Prestart() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (threads_ > 0) return;
  ++threads_;
  std::thread([this] { Worker(); }).detach();
}

void CallbackPool::Worker() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (!jobs_.empty()) {
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      try {
        job();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "byteps torch: future completion threw: %s\n", e.what());
      }
      lock.lock();
      continue;
    }
    ++idle_;
    if (wake_.wait_for(lock, kIdleExit, [this] { return promised_ > 0; })) {
      --promised_;  // Run() already took us off the idle count
      continue;
    }
    --idle_;
    if (threads_ > 1) {
      --threads_;
      return;
    }
  }
}

}  // namespace byteps_torch
