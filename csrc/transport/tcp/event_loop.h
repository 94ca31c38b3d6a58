// One epoll thread that drives many non-blocking sockets.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace bps {

class Pollable {
 public:
  virtual ~Pollable() = default;
  virtual void OnEvents(uint32_t events) = 0;  // called on the loop thread
};

class EventLoop {
 public:
  explicit EventLoop(std::string name);
  ~EventLoop();
  void Start();
  void Stop();  // joins; pollables are dropped
  // Thread-safe. The loop keeps `p` alive while registered.
  void Register(int fd, uint32_t events, std::shared_ptr<Pollable> p);
  void Modify(int fd, uint32_t events);
  void Unregister(int fd);  // loop thread or any thread
  // Runs fn on the loop thread soon (thread-safe).
  void Post(std::function<void()> fn);
  bool InLoopThread() const { return std::this_thread::get_id() == thread_id_.load(std::memory_order_acquire); }

 private:
  void Run();
  std::string name_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::atomic<bool> running_{false};
  std::thread thread_;
  // Set by the loop thread as it starts, read by senders on any thread
  // (ThreadSanitizer found the plain field racing).
  std::atomic<std::thread::id> thread_id_{};
  std::mutex mu_;
  std::unordered_map<int, std::shared_ptr<Pollable>> pollables_;
  std::vector<std::function<void()>> posted_;
};

}  // namespace bps
