#include "torch/completion_queue.h"

#include <ATen/core/grad_mode.h>

#include <cstdio>
#include <exception>

namespace byteps_torch {

CompletionQueue& CompletionQueue::Instance() {
  static CompletionQueue* queue = new CompletionQueue();
  return *queue;
}

CompletionQueue::CompletionQueue() : thread_([this] { Loop(); }) {
  thread_.detach();
}

void CompletionQueue::Push(Handler handler, int status, std::string message) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    items_.push_back(Item{std::move(handler), status, std::move(message)});
  }
  ready_.notify_one();
}

void CompletionQueue::Loop() {
  // Handlers copy results into caller tensors, which may be leaves that
  // require grad (parameters): that copy is data movement, not autograd.
  at::AutoGradMode no_grad(false);
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [this] { return !items_.empty(); });
      item = std::move(items_.front());
      items_.pop_front();
    }
    try {
      item.handler(item.status, item.message);
    } catch (const std::exception& e) {
      // Handlers complete their Future themselves; an escape here is a bug in
      // the adapter, and losing the thread would hang every later operation.
      std::fprintf(stderr, "byteps torch: completion handler threw: %s\n", e.what());
    }
  }
}

}  // namespace byteps_torch
