#include "common/timeline.h"

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "common/logging.h"

namespace bps {
namespace {

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out.push_back(c);
  }
  return out;
}

// One lane per stage keeps the pipeline readable in Perfetto.
int LaneOf(const char* stage) {
  static const char* kLanes[] = {"stage_in", "local_reduce", "push_pull", "gather", "server_sum"};
  for (int i = 0; i < 5; ++i) {
    if (std::string(stage) == kLanes[i]) return i + 1;
  }
  return 9;
}

}  // namespace

uint64_t Timeline::NowMicros() {
  // Wall clock, so traces of processes on one host line up when merged.
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

TraceSettings TraceSettingsFromEnvironment() {
  TraceSettings t;
  const char* on = getenv("BYTEPS_TRACE_ON");
  t.enabled = on && std::string(on) == "1";
  if (const char* s = getenv("BYTEPS_TRACE_START_STEP")) t.start_step = static_cast<uint32_t>(atoi(s));
  if (const char* e = getenv("BYTEPS_TRACE_END_STEP")) t.end_step = static_cast<uint32_t>(atoi(e));
  const char* dir = getenv("BYTEPS_TRACE_DIR");
  if (dir && *dir) t.dir = dir;
  return t;
}

void Timeline::Configure(const std::string& who, const std::string& file_stem, const TraceSettings& settings) {
  enabled_ = settings.enabled;
  if (!enabled_) return;
  start_step_ = settings.start_step;
  end_step_ = settings.end_step;
  const std::string& d = settings.dir;
  mkdir(d.c_str(), 0755);
  who_ = who;
  path_ = d + "/" + file_stem + ".json";
  events_.reserve(1 << 16);
}

void Timeline::Record(const std::string& tensor, uint32_t partition, uint32_t round, const char* stage,
                      uint64_t start_us, uint64_t end_us) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(Event{tensor, partition, round, stage, start_us, end_us});
}

void Timeline::Finish() {
  if (!enabled_) return;
  std::vector<Event> events;
  {
    std::lock_guard<std::mutex> lock(mu_);
    events.swap(events_);
  }
  // Called at shutdown from the caller's thread, never the engine thread:
  // the hot path only appends events.
  FILE* f = fopen(path_.c_str(), "w");
  if (!f) {
    BPS_LOG(Warning) << "cannot write trace " << path_;
    return;
  }
  {
    fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    fprintf(f, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": \"%s\", \"args\": {\"name\": \"%s\"}}",
            JsonEscape(who_).c_str(), JsonEscape(who_).c_str());
    for (const Event& e : events) {
      fprintf(f,
              ",\n{\"name\": \"%s.p%u\", \"cat\": \"%s\", \"ph\": \"X\", \"ts\": %llu, \"dur\": %llu, \"pid\": "
              "\"%s\", \"tid\": %d, \"args\": {\"tensor\": \"%s\", \"partition\": %u, \"step\": %u}}",
              JsonEscape(e.tensor).c_str(), e.partition, e.stage, static_cast<unsigned long long>(e.start_us),
              static_cast<unsigned long long>(e.end_us > e.start_us ? e.end_us - e.start_us : 0),
              JsonEscape(who_).c_str(), LaneOf(e.stage), JsonEscape(e.tensor).c_str(), e.partition, e.round);
    }
    fprintf(f, "\n]}\n");
    fclose(f);
  }
  BPS_LOG(Info) << "wrote " << events.size() << " trace events to " << path_;
}

}  // namespace bps
