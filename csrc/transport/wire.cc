#include "transport/wire.h"

#include <cstdio>

namespace bps {

const char* MessageTypeName(uint16_t type) {
  switch (static_cast<MessageType>(type)) {
    case MessageType::kPush: return "push";
    case MessageType::kResponse: return "response";
    case MessageType::kError: return "error";
    case MessageType::kBye: return "bye";
    case MessageType::kHeartbeat: return "heartbeat";
  }
  return "unknown";
}

Status ValidateHeader(const MessageHeader& h) {
  if (h.magic != kWireMagic) {
    char magic[16];
    snprintf(magic, sizeof(magic), "0x%08x", h.magic);
    return Status::PeerFailure(std::string("bad magic ") + magic + ": peer is not a byteps-native process");
  }
  if (h.version != kWireVersion) {
    return Status::PeerFailure("peer speaks wire version " + std::to_string(h.version) + ", this build speaks " +
                               std::to_string(kWireVersion) + ": run the same byteps-native version everywhere");
  }
  switch (static_cast<MessageType>(h.type)) {
    case MessageType::kPush:
    case MessageType::kResponse:
      if (!IsValidDataType(h.dtype)) return Status::PeerFailure("invalid dtype " + std::to_string(h.dtype));
      if (h.payload_bytes > kMaxPayloadBytes) {
        return Status::PeerFailure("payload of " + std::to_string(h.payload_bytes) + " bytes exceeds the limit");
      }
      if (h.payload_bytes % DataTypeSize(static_cast<DataType>(h.dtype)) != 0) {
        return Status::PeerFailure("payload of " + std::to_string(h.payload_bytes) + " bytes is not a multiple of " +
                                   DataTypeName(static_cast<DataType>(h.dtype)));
      }
      if (h.num_contributors == 0 && h.type == static_cast<uint16_t>(MessageType::kPush)) {
        return Status::PeerFailure("push without contributor count");
      }
      return Status::OK();
    case MessageType::kError:
      if (h.payload_bytes > kMaxErrorPayloadBytes) return Status::PeerFailure("error message too long");
      return Status::OK();
    case MessageType::kBye:
    case MessageType::kHeartbeat:
      if (h.payload_bytes != 0) return Status::PeerFailure("control message with a payload");
      return Status::OK();
  }
  return Status::PeerFailure("unknown message type " + std::to_string(h.type));
}

}  // namespace bps
