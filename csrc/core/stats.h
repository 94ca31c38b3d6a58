// The engine's counters (bps_stats_json, the periodic stats log line).
#pragma once
#include <atomic>
#include <cstdint>

namespace bps {

struct EngineStats {
  std::atomic<uint64_t> bytes_pushed{0}, bytes_pulled{0}, ops_completed{0}, partitions_completed{0};
  std::atomic<uint64_t> local_reduce_ns{0}, gather_ns{0}, stage_ns{0};
  std::atomic<int64_t> queue_depth{0};
  // Compressed pushes, and the bytes they would have taken uncompressed
  // (bytes_pushed counts what went on the wire).
  std::atomic<uint64_t> compressed_pushes{0}, bytes_before_compression{0};
  // Of those, the pushes the reducer compressed where the slice lives
  // (device memory: only the payload crossed to the host).
  std::atomic<uint64_t> pushes_compressed_on_reducer{0};
  // Pushes whose receipt (kReceived) came back, and the time from their
  // admission to it: with the credit window's stall time, says whether the
  // window is shorter than the link's bandwidth times this delay.
  std::atomic<uint64_t> receipts{0}, receipt_ns{0};
  // Where the engine thread's time goes (issue 38): its passes over the
  // active partitions, and of that the calls that issue device work (CUDA
  // copies, events, collectives). A pass is the latency a ready partition
  // may wait for its push, so a long one idles the link.
  std::atomic<uint64_t> passes{0}, pass_ns{0}, pass_max_ns{0}, device_issue_ns{0}, device_issue_max_ns{0};
  static constexpr int kMaxTrackedServers = 256;
  std::atomic<uint64_t> bytes_per_server[kMaxTrackedServers] = {};
};

}  // namespace bps
