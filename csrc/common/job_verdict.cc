#include "common/job_verdict.h"

#include <functional>
#include <map>
#include <mutex>

namespace bps {
namespace {

std::mutex g_mu;
// By a hash of the secret: the verdicts need not keep another copy of it.
std::map<size_t, std::string>& Verdicts() {
  static auto* verdicts = new std::map<size_t, std::string>();  // never destroyed: threads outlive statics
  return *verdicts;
}

}  // namespace

void NoteJobAborted(const std::string& job_token, const std::string& why) {
  std::lock_guard<std::mutex> lock(g_mu);
  Verdicts().emplace(std::hash<std::string>()(job_token), why);  // the first verdict stays
}

bool JobAborted(const std::string& job_token, std::string* why) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = Verdicts().find(std::hash<std::string>()(job_token));
  if (it == Verdicts().end()) return false;
  if (why) *why = it->second;
  return true;
}

}  // namespace bps
