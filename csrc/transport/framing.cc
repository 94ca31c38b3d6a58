#include "transport/framing.h"

#include <cstdio>
#include <string>

namespace bps {
namespace transport {

Status ValidateFrame(const FrameHeader& h, const FrameRules& rules) {
  if (h.magic != kWireMagic) {
    char magic[16];
    snprintf(magic, sizeof(magic), "0x%08x", h.magic);
    return Status::PeerFailure(std::string("bad magic ") + magic + ": peer is not a byteps-native process");
  }
  if (h.version != kWireVersion) {
    return Status::PeerFailure("peer speaks wire version " + std::to_string(h.version) + ", this build speaks " +
                               std::to_string(kWireVersion) + ": run the same byteps-native version everywhere");
  }
  FrameKind kind;
  if (!rules.kind_of(h.type, &kind)) return Status::PeerFailure("unknown message type " + std::to_string(h.type));
  switch (kind) {
    case FrameKind::kData:
      if (h.payload_bytes > kMaxPayloadBytes) {
        return Status::PeerFailure("payload of " + std::to_string(h.payload_bytes) + " bytes exceeds the limit");
      }
      break;
    case FrameKind::kText:
      if (h.payload_bytes > kMaxErrorPayloadBytes) return Status::PeerFailure("error message too long");
      break;
    case FrameKind::kSignal:
      if (h.payload_bytes != 0) return Status::PeerFailure("control message with a payload");
      break;
  }
  return rules.check ? rules.check(h) : Status::OK();
}

FrameKind KindOf(const FrameHeader& h, const FrameRules& rules) {
  FrameKind kind = FrameKind::kText;
  if (!rules.kind_of(h.type, &kind)) return FrameKind::kText;
  return kind;
}

}  // namespace transport
}  // namespace bps
