// Helpers for in-process engine tests: a scoped environment (the engine reads
// its Config from the environment in Init) and a scheduler served on a
// thread of the test process.
#pragma once
#include <dirent.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "store/tcp_store.h"

namespace bps {
namespace testing_support {

// Sets variables for its lifetime, then restores the previous values.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::map<std::string, std::string>& vars) {
    for (auto& kv : vars) {
      const char* old = getenv(kv.first.c_str());
      saved_[kv.first] = old ? std::make_pair(true, std::string(old)) : std::make_pair(false, std::string());
      setenv(kv.first.c_str(), kv.second.c_str(), 1);
    }
  }
  ~ScopedEnv() {
    for (auto& kv : saved_) {
      if (kv.second.first) {
        setenv(kv.first.c_str(), kv.second.second.c_str(), 1);
      } else {
        unsetenv(kv.first.c_str());
      }
    }
  }

 private:
  std::map<std::string, std::pair<bool, std::string>> saved_;
};

// A scheduler (TcpStoreServer) on 127.0.0.1:<ephemeral>, served on a thread.
class InProcessScheduler {
 public:
  explicit InProcessScheduler(const std::string& token) : server_(new TcpStoreServer(token, 30)) {
    Status st = server_->Listen("127.0.0.1", 0);
    if (!st.ok()) abort();
    thread_ = std::thread([this] {
      server_->ServeUntilDone(1);
      done_ = true;
    });
  }
  ~InProcessScheduler() {
    // ServeUntilDone ends once every client left; a client that a failing
    // test leaked would keep it forever: then leak the server with it.
    for (int i = 0; i < 100 && !done_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (done_) {
      thread_.join();
    } else {
      thread_.detach();
      server_.release();
    }
  }
  // Whether every client that connected has left (ServeUntilDone returned).
  bool WaitUntilAllClientsLeft(double seconds) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!done_ && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return done_;
  }
  int port() const { return server_->port(); }
  MemoryStore& store() { return server_->store(); }

 private:
  std::unique_ptr<TcpStoreServer> server_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

inline int CountThreads() {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  if (!d) return -1;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n;
}

}  // namespace testing_support
}  // namespace bps
