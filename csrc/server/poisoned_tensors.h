// Tensors that failed on this server (a mismatch, or a worker's report that
// its machine's ranks disagree), by name hash, with the first error: every
// later push of one is answered with that error. Rare, so the push path reads
// an atomic flag and locks only once something was poisoned.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace bps {

class PoisonedTensors {
 public:
  // Whether `name_hash` is poisoned, and its error.
  bool Find(uint64_t name_hash, std::string* message);
  // The first message of a tensor stays.
  void Poison(uint64_t name_hash, const std::string& message);

 private:
  std::atomic<bool> any_{false};
  std::mutex mu_;
  std::unordered_map<uint64_t, std::string> messages_;
};

}  // namespace bps
