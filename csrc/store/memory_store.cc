#include "store/memory_store.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>

namespace bps {

Status MemoryStore::Set(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    data_[key] = value;
  }
  cv_.notify_all();
  return Status::OK();
}

Status MemoryStore::Get(const std::string& key, double timeout_seconds, std::string* value) {
  // Bounded so the conversion to clock ticks cannot overflow (a year is plenty).
  timeout_seconds = std::max(0.0, std::min(timeout_seconds, 365 * 86400.0));
  std::unique_lock<std::mutex> lock(mu_);
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(timeout_seconds));
  while (true) {
    if (!aborted_.empty()) return Status::PeerFailure(aborted_);
    auto it = data_.find(key);
    if (it != data_.end()) {
      *value = it->second;
      return Status::OK();
    }
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && data_.find(key) == data_.end()) {
      return Status::Timeout("key '" + key + "' did not appear within " +
                             std::to_string(static_cast<int>(timeout_seconds)) + " s");
    }
  }
}

Status MemoryStore::Add(const std::string& key, int64_t delta, int64_t* result) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t v = 0;
    auto it = data_.find(key);
    if (it != data_.end()) {
      // The value may have been Set to anything by a client: refuse, never throw
      // (an exception here would terminate the scheduler).
      const std::string& text = it->second;
      errno = 0;
      char* end = nullptr;
      long long parsed = strtoll(text.c_str(), &end, 10);
      if (text.empty() || errno != 0 || end != text.c_str() + text.size()) {
        return Status::Invalid("store key '" + key.substr(0, 200) + "' does not hold an integer: cannot add to it");
      }
      v = parsed;
    }
    if (__builtin_add_overflow(v, delta, &v)) {
      return Status::Invalid("store key '" + key.substr(0, 200) + "' would overflow a 64-bit counter");
    }
    data_[key] = std::to_string(v);
    *result = v;
  }
  cv_.notify_all();
  return Status::OK();
}

void MemoryStore::Abort(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = why;
  }
  cv_.notify_all();
}

}  // namespace bps
