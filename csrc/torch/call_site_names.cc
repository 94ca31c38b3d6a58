#include "torch/call_site_names.h"

#include <c10/util/Exception.h>

#include <cstdlib>

#include "torch/tensor_wire.h"

namespace byteps_torch {
namespace {

int64_t SlotsFromEnv() {
  const char* value = std::getenv("BYTEPS_C10D_NAME_SLOTS");
  if (value == nullptr || *value == '\0') return 32;
  char* end = nullptr;
  long parsed = std::strtol(value, &end, 10);
  TORCH_CHECK(end != value && *end == '\0' && parsed >= 1, "BYTEPS_C10D_NAME_SLOTS='", value,
              "' is not a positive integer; unset it (default 32) or fix it");
  return parsed;
}

const char* TagOf(at::ScalarType type) {
  // Data movement travels as bytes; reductions in an engine dtype.
  return type == at::kByte ? "u8" : DtypeTag(type);
}

}  // namespace

CallSiteNames::CallSiteNames(std::string group_name)
    : group_name_(std::move(group_name)), slots_(SlotsFromEnv()) {}

EngineCall CallSiteNames::Next(const char* op, const at::Tensor& wire, bool later_first) {
  std::string signature = group_name_ + "." + op + "." + TagOf(wire.scalar_type()) + "." +
                          std::to_string(wire.numel());
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t occurrence = occurrences_[signature]++;
  EngineCall call;
  call.name = "c10d." + signature + "." + std::to_string(occurrence % slots_);
  // Kept below 2^30 so that it stays positive; a wrap after a billion calls
  // costs one mis-ordered step.
  call.priority = later_first ? static_cast<int32_t>(later_first_calls_++ & 0x3fffffff) : 0;
  recent_.push_back(call);
  if (recent_.size() > kRecent) recent_.pop_front();
  return call;
}

std::vector<EngineCall> CallSiteNames::Recent() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::vector<EngineCall>(recent_.begin(), recent_.end());
}

}  // namespace byteps_torch
