// The engine's counters as JSON (bps_stats_json).
#include <algorithm>
#include <sstream>

#include "core/engine.h"

namespace bps {

std::string Engine::StatsJson() {
  std::ostringstream s;
  s << "{\"rank\": " << (initialized_ ? rank() : -1) << ", \"bytes_pushed\": " << stats_.bytes_pushed.load()
    << ", \"bytes_pulled\": " << stats_.bytes_pulled.load() << ", \"ops_completed\": " << stats_.ops_completed.load()
    << ", \"partitions_completed\": " << stats_.partitions_completed.load()
    << ", \"queue_depth\": " << stats_.queue_depth.load()
    << ", \"compressed_pushes\": " << stats_.compressed_pushes.load()
    << ", \"bytes_before_compression\": " << stats_.bytes_before_compression.load()
    << ", \"pushes_compressed_on_reducer\": " << stats_.pushes_compressed_on_reducer.load()
    << ", \"stage_seconds\": {\"stage_in\": " << stats_.stage_ns.load() * 1e-9
    << ", \"local_reduce\": " << stats_.local_reduce_ns.load() * 1e-9
    << ", \"gather\": " << stats_.gather_ns.load() * 1e-9 << "}"
    << ", \"credit_stall_seconds\": " << credits_.stalled_ns() * 1e-9
    << ", \"receipts\": " << stats_.receipts.load() << ", \"receipt_seconds\": " << stats_.receipt_ns.load() * 1e-9
    << ", \"engine_passes\": " << stats_.passes.load() << ", \"engine_pass_seconds\": " << stats_.pass_ns.load() * 1e-9
    << ", \"engine_pass_max_seconds\": " << stats_.pass_max_ns.load() * 1e-9
    << ", \"device_issue_seconds\": " << stats_.device_issue_ns.load() * 1e-9
    << ", \"device_issue_max_seconds\": " << stats_.device_issue_max_ns.load() * 1e-9
    << ", \"staging_bytes\": " << (reducer_ ? reducer_->staging_bytes() : 0)
    << ", \"staging_backed_bytes\": " << (reducer_ ? reducer_->staging_backed_bytes() : 0)
    << ", \"staging_reserve_bytes\": " << (reducer_ ? reducer_->staging_reserve_bytes() : 0)
    << ", \"local_keys_used\": " << (reducer_ ? reducer_->keys_used() : 0);
  if (LocalReducer* device = device_reducer_live_.load()) {
    s << ", \"device\": {\"reducer\": \"" << device->name() << "\", \"cuda_device\": " << device_
      << ", \"pinned_staging_bytes\": " << device->staging_bytes() << ", \"keys\": " << device->keys_used() << "}";
  }
  s
    << ", \"num_servers\": " << num_servers_ << ", \"bytes_pushed_per_server\": [";
  for (int i = 0; i < std::min(num_servers_, EngineStats::kMaxTrackedServers); ++i) {
    s << (i ? ", " : "") << stats_.bytes_per_server[i].load();
  }
  s << "]";
  s << "}";
  return s.str();
}

}  // namespace bps
