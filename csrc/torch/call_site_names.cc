#include "torch/call_site_names.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>

#include "torch/tensor_wire.h"

namespace byteps_torch {
namespace {

int64_t PositiveFromEnv(const char* name, int64_t fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  long long parsed = std::strtoll(value, &end, 10);
  TORCH_CHECK(end != value && *end == '\0' && parsed >= 1, name, "='", value,
              "' is not a positive integer; unset it (default ", fallback, ") or fix it");
  return parsed;
}

const char* TagOf(at::ScalarType type) {
  // Data movement travels as bytes; reductions in an engine dtype.
  return type == at::kByte ? "u8" : DtypeTag(type);
}

}  // namespace

CallSiteNames::CallSiteNames(std::string group_name)
    : group_name_(std::move(group_name)),
      slots_(PositiveFromEnv("BYTEPS_C10D_NAME_SLOTS", 32)),
      slot_bytes_(PositiveFromEnv("BYTEPS_C10D_SLOT_BYTES", int64_t{16} << 20)) {}

int64_t CallSiteNames::SlotsFor(int64_t wire_bytes) const {
  return std::max<int64_t>(1, std::min<int64_t>(slots_, slot_bytes_ / std::max<int64_t>(1, wire_bytes)));
}

EngineCall CallSiteNames::Next(const char* op, const at::Tensor& wire, bool later_first) {
  std::string signature = group_name_ + "." + op + "." + TagOf(wire.scalar_type()) + "." +
                          std::to_string(wire.numel());
  // Depends only on the signature, so every rank cycles alike.
  const int64_t slots = SlotsFor(static_cast<int64_t>(wire.nbytes()));
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t occurrence = occurrences_[signature]++;
  EngineCall call;
  call.name = "c10d." + signature + "." + std::to_string(occurrence % slots);
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
