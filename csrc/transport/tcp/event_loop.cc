#include "transport/tcp/event_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>

#include "common/logging.h"

namespace bps {

EventLoop::EventLoop(std::string name) : name_(std::move(name)) {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
}

EventLoop::~EventLoop() {
  Stop();
  close(epoll_fd_);
  close(wake_fd_);
}

void EventLoop::Start() {
  running_ = true;
  thread_ = std::thread([this] { Run(); });
}

void EventLoop::Stop() {
  if (!running_.exchange(false)) return;
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  pollables_.clear();
}

void EventLoop::Register(int fd, uint32_t events, std::shared_ptr<Pollable> p) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pollables_[fd] = std::move(p);
  }
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
}

void EventLoop::Modify(int fd, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev);
}

void EventLoop::Unregister(int fd) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  std::shared_ptr<Pollable> keep;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pollables_.find(fd);
    if (it == pollables_.end()) return;
    keep = std::move(it->second);
    pollables_.erase(it);
  }
  // Destroy outside the lock, possibly on the loop thread after its callback.
  if (InLoopThread()) Post([keep] {});
}

void EventLoop::Post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    posted_.push_back(std::move(fn));
  }
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

void EventLoop::Run() {
  thread_id_.store(std::this_thread::get_id(), std::memory_order_release);
  epoll_event events[64];
  while (running_) {
    int n = epoll_wait(epoll_fd_, events, 64, 200);
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == wake_fd_) {
        uint64_t v;
        (void)!read(wake_fd_, &v, sizeof(v));
        continue;
      }
      std::shared_ptr<Pollable> p;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = pollables_.find(fd);
        if (it != pollables_.end()) p = it->second;
      }
      if (p) p->OnEvents(events[i].events);
    }
    std::vector<std::function<void()>> todo;
    {
      std::lock_guard<std::mutex> lock(mu_);
      todo.swap(posted_);
    }
    for (auto& fn : todo) fn();
  }
}

}  // namespace bps
