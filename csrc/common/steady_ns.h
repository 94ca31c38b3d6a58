// The monotonic clock in nanoseconds, for the engine's counters (stage
// times, credit stalls, receipts, its passes).
#pragma once
#include <chrono>
#include <cstdint>

namespace bps {

inline uint64_t SteadyNowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

}  // namespace bps
