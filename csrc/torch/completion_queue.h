// Runs the torch-side half of every engine completion on one adapter thread.
//
// Why not complete Futures on the engine's callback thread: markCompleted()
// runs the Future's then()-callbacks inline, which may be user Python code
// (needs the GIL, may block, may submit new work). The engine asks callbacks
// not to block, so its thread only enqueues here.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace byteps_torch {

class CompletionQueue {
 public:
  // status: a bps_status_code; message: the engine's text (empty on success).
  using Handler = std::function<void(int status, const std::string& message)>;

  // The process-wide queue. Deliberately never destroyed: engine threads may
  // still deliver completions while the interpreter shuts down.
  static CompletionQueue& Instance();

  void Push(Handler handler, int status, std::string message);

 private:
  CompletionQueue();
  void Loop();

  struct Item {
    Handler handler;
    int status;
    std::string message;
  };
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Item> items_;
  std::thread thread_;
};

}  // namespace byteps_torch
