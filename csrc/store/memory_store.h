// In-process store: the rendezvous of a single-process job, and the state
// behind the scheduler's TcpStoreServer.
#pragma once
#include <condition_variable>
#include <map>
#include <mutex>

#include "store/store.h"

namespace bps {

class MemoryStore : public Store {
 public:
  Status Set(const std::string& key, const std::string& value) override;
  Status Get(const std::string& key, double timeout_seconds, std::string* value) override;
  Status Add(const std::string& key, int64_t delta, int64_t* result) override;
  // Wakes all waiters with an error (scheduler shutting down).
  void Abort(const std::string& why);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> data_;
  std::string aborted_;
};

}  // namespace bps
