#include "server/poisoned_tensors.h"

namespace bps {

bool PoisonedTensors::Find(uint64_t name_hash, std::string* message) {
  if (!any_.load(std::memory_order_acquire)) return false;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = messages_.find(name_hash);
  if (it == messages_.end()) return false;
  *message = it->second;
  return true;
}

void PoisonedTensors::Poison(uint64_t name_hash, const std::string& message) {
  std::lock_guard<std::mutex> lock(mu_);
  messages_.emplace(name_hash, message);
  any_.store(true, std::memory_order_release);
}

}  // namespace bps
