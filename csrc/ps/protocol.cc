#include "ps/protocol.h"

namespace bps {
namespace {

bool KindOfType(uint16_t type, transport::FrameKind* kind) {
  switch (static_cast<MessageType>(type)) {
    case MessageType::kPush:
    case MessageType::kResponse:
      *kind = transport::FrameKind::kData;
      return true;
    case MessageType::kError:
      *kind = transport::FrameKind::kText;
      return true;
    case MessageType::kBye:
    case MessageType::kHeartbeat:
    case MessageType::kReceived:
      *kind = transport::FrameKind::kSignal;
      return true;
  }
  return false;
}

// What framing does not check: the tensor fields of data frames.
Status CheckFields(const transport::FrameHeader& frame) {
  const MessageHeader h = FromFrame(frame);
  if (h.type != static_cast<uint16_t>(MessageType::kPush) && h.type != static_cast<uint16_t>(MessageType::kResponse)) {
    return Status::OK();
  }
  if (!IsValidDataType(h.dtype)) return Status::PeerFailure("invalid dtype " + std::to_string(h.dtype));
  if (h.payload_bytes % DataTypeSize(static_cast<DataType>(h.dtype)) != 0) {
    return Status::PeerFailure("payload of " + std::to_string(h.payload_bytes) + " bytes is not a multiple of " +
                               DataTypeName(static_cast<DataType>(h.dtype)));
  }
  if (h.num_contributors == 0 && h.type == static_cast<uint16_t>(MessageType::kPush)) {
    return Status::PeerFailure("push without contributor count");
  }
  return Status::OK();
}

const transport::FrameRules kPsFrameRules = {"byteps-native parameter server", &KindOfType, &CheckFields,
                                             &MessageTypeName};

}  // namespace

const transport::FrameRules& PsFrameRules() { return kPsFrameRules; }

const char* MessageTypeName(uint16_t type) {
  switch (static_cast<MessageType>(type)) {
    case MessageType::kPush: return "push";
    case MessageType::kResponse: return "response";
    case MessageType::kError: return "error";
    case MessageType::kBye: return "bye";
    case MessageType::kHeartbeat: return "heartbeat";
    case MessageType::kReceived: return "received";
  }
  return "unknown";
}

Status ValidateHeader(const MessageHeader& h) { return transport::ValidateFrame(ToFrame(h), kPsFrameRules); }

}  // namespace bps
