#include "core/submission_log.h"

#include <utility>

namespace bps {
namespace {

std::string OneLine(const Submission& s) {
  std::string line = std::to_string(static_cast<int>(s.dtype)) + " " + std::to_string(static_cast<int>(s.reduce_op)) +
                     " " + std::to_string(s.priority) + " " + std::to_string(s.device) + " " +
                     std::to_string(s.shape.size());
  for (int64_t d : s.shape) line += " " + std::to_string(d);
  return line + " " + s.name;
}

}  // namespace

void SubmissionLog::Record(Submission submission) {
  std::lock_guard<std::mutex> lock(mu_);
  kept_.push_back(std::move(submission));
  if (kept_.size() > kKept) kept_.pop_front();
  ++count_;
}

int64_t SubmissionLog::count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return count_;
}

bool SubmissionLog::Line(int64_t index, std::string* line) const {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t first = count_ - static_cast<int64_t>(kept_.size());
  if (index < first || index >= count_) return false;
  const Submission& s = kept_[static_cast<size_t>(index - first)];
  if (!s.group) {
    *line = OneLine(s);
    return true;
  }
  *line = "group " + std::to_string(s.fusion_bytes) + " " + std::to_string(s.members.size());
  for (const Submission& m : s.members) *line += "\n" + OneLine(m);
  return true;
}

}  // namespace bps
