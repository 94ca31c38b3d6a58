// Timeline: a Chrome-trace (Perfetto-compatible) JSON per process with one
// event per tensor partition and stage. BytePS variables: BYTEPS_TRACE_ON,
// BYTEPS_TRACE_START_STEP, BYTEPS_TRACE_END_STEP, BYTEPS_TRACE_DIR. A "step"
// is the round of a tensor name (its n-th push_pull).
//
// Cost when off: one predictable branch per stage. When on: an append to a
// vector on the engine thread; JSON is written at shutdown by the thread that
// shuts down, never by the engine thread.
// In common because workers (core) and servers (server) both keep one, and
// neither of those two layers includes the other.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace bps {

// Which rounds to trace and where (BYTEPS_TRACE_*).
struct TraceSettings {
  bool enabled = false;
  uint32_t start_step = 0, end_step = UINT32_MAX;
  std::string dir = "./traces";
};
TraceSettings TraceSettingsFromEnvironment();

class Timeline {
 public:
  // `who` names the process in the trace ("worker 3", "server 0").
  void Configure(const std::string& who, const std::string& file_stem, const TraceSettings& settings);
  // The same, with the settings of the environment.
  void Configure(const std::string& who, const std::string& file_stem) {
    Configure(who, file_stem, TraceSettingsFromEnvironment());
  }
  bool Tracing(uint32_t round) const { return enabled_ && round >= start_step_ && round <= end_step_; }
  static uint64_t NowMicros();
  void Record(const std::string& tensor, uint32_t partition, uint32_t round, const char* stage, uint64_t start_us,
              uint64_t end_us);
  // Writes what was recorded (off the engine thread) and waits for it.
  void Finish();
  const std::string& path() const { return path_; }

 private:
  struct Event {
    std::string tensor;
    uint32_t partition, round;
    const char* stage;
    uint64_t start_us, end_us;
  };
  bool enabled_ = false;
  uint32_t start_step_ = 0, end_step_ = UINT32_MAX;
  std::string who_, path_;
  std::mutex mu_;
  std::vector<Event> events_;
};

}  // namespace bps
