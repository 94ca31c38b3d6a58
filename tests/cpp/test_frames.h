// A protocol of the transport suites' own: the transport is told about
// frames only through FrameRules, so its conformance is checked without the
// parameter-server protocol (csrc/ps/protocol.h) that the engine speaks.
#pragma once
#include <cstdint>
#include <string>

#include "transport/framing.h"

namespace bps {
namespace transport {
namespace testing_frames {

enum : uint16_t { kData = 1, kText = 2, kSignal = 3 };

inline bool KindOfTestType(uint16_t type, FrameKind* kind) {
  switch (type) {
    case kData: *kind = FrameKind::kData; return true;
    case kText: *kind = FrameKind::kText; return true;
    case kSignal: *kind = FrameKind::kSignal; return true;
  }
  return false;
}
inline const char* TestTypeName(uint16_t type) {
  return type == kData ? "data" : type == kText ? "text" : type == kSignal ? "signal" : "unknown";
}
inline const FrameRules& TestFrameRules() {
  static const FrameRules rules = {"transport test frames", &KindOfTestType, nullptr, &TestTypeName};
  return rules;
}

inline FrameHeader DataHeader(uint64_t key, uint32_t round, uint64_t bytes) {
  FrameHeader h;
  h.type = kData;
  h.key = key;
  h.round = round;
  h.payload_bytes = bytes;
  return h;
}
inline FrameHeader TextHeader(uint64_t key, size_t bytes) {
  FrameHeader h;
  h.type = kText;
  h.key = key;
  h.payload_bytes = bytes;
  return h;
}

}  // namespace testing_frames
}  // namespace transport
}  // namespace bps
