#include "tf/submission_log.h"

#include <cstring>
#include <deque>
#include <mutex>
#include <utility>

namespace byteps_native {
namespace tf_adapter {
namespace {

// A rank that joins late asks for the others' submissions since its own
// count; that many are kept (a few MB of names at most).
constexpr size_t kKept = 1 << 17;

struct Log {
  std::mutex mu;
  std::deque<Submission> kept;
  int64_t count = 0;  // recorded in all; kept.front() is number count - kept.size()
};

Log& TheLog() {
  static Log* log = new Log();  // never destroyed: kernels may run during exit
  return *log;
}

}  // namespace

void RecordSubmission(Submission submission) {
  Log& log = TheLog();
  std::lock_guard<std::mutex> lock(log.mu);
  log.kept.push_back(std::move(submission));
  if (log.kept.size() > kKept) log.kept.pop_front();
  ++log.count;
}

}  // namespace tf_adapter
}  // namespace byteps_native

extern "C" {

__attribute__((visibility("default"))) int64_t byteps_tf_submission_count(void) {
  auto& log = byteps_native::tf_adapter::TheLog();
  std::lock_guard<std::mutex> lock(log.mu);
  return log.count;
}

__attribute__((visibility("default"))) int64_t byteps_tf_submission(int64_t index, char* buf,
                                                                    int64_t cap) {
  auto& log = byteps_native::tf_adapter::TheLog();
  std::string text;
  {
    std::lock_guard<std::mutex> lock(log.mu);
    const int64_t first = log.count - static_cast<int64_t>(log.kept.size());
    if (index < first || index >= log.count) return -1;
    const auto& s = log.kept[static_cast<size_t>(index - first)];
    text = std::to_string(s.dtype) + " " + std::to_string(s.reduce_op) + " " +
           std::to_string(s.priority) + " " + std::to_string(s.shape.size());
    for (int64_t d : s.shape) text += " " + std::to_string(d);
    text += " " + s.name;
  }
  const int64_t length = static_cast<int64_t>(text.size());
  if (buf != nullptr && cap > length) std::memcpy(buf, text.c_str(), text.size() + 1);
  return length;
}

}  // extern "C"
