// Transport framing: what a transport needs to move a message, and nothing
// about tensors. Every frame is a fixed 64-byte header and header.payload_bytes
// of payload. The transport reads magic, version, type, key, round and
// payload_bytes (it frames, validates and matches posted receives by them);
// the other bytes belong to the protocol above (csrc/ps/protocol.h) and are
// carried as they are.
//
// The header is validated before any byte of payload is read or any memory is
// allocated: framing here (magic, version, a known type, length limits by the
// frame's kind), then the protocol's own checks through its FrameRules.
#pragma once
#include <cstddef>
#include <cstdint>

#include "common/status.h"

namespace bps {

constexpr uint32_t kWireMagic = 0x4E535042;  // "BPSN" little-endian
// One version for the whole wire: framing, the handshake (tcp/handshake.h)
// and the protocol above (csrc/ps/protocol.h, which keeps the history of
// versions). Bump it when any of them changes.
constexpr uint16_t kWireVersion = 4;
// Largest data payload accepted from a peer: a partition slice. Bigger frames
// close the connection (a peer that sends them is broken or hostile).
constexpr uint64_t kMaxPayloadBytes = uint64_t(1) << 31;
// Largest text payload (an error message); also the largest unexpected
// payload a connection buffers for its handler.
constexpr uint64_t kMaxErrorPayloadBytes = 64 * 1024;
constexpr size_t kFrameHeaderBytes = 64;

namespace transport {

// The transport's view of the 64-byte header. Not packed: every field sits
// at a multiple of its size, so the layout has no padding, and the header is
// 8-byte aligned wherever it is kept.
struct FrameHeader {
  uint32_t magic = kWireMagic;
  uint16_t version = kWireVersion;
  uint16_t type = 0;              // the protocol's message type (its FrameRules give the kind)
  uint64_t key = 0;               // a posted receive matches (key, round)
  uint8_t protocol_a[8] = {};     // the protocol's
  uint32_t round = 0;
  uint8_t protocol_b[4] = {};     // the protocol's
  uint64_t payload_bytes = 0;
  uint8_t protocol_c[24] = {};    // the protocol's
};
static_assert(sizeof(FrameHeader) == kFrameHeaderBytes, "the frame header is 64 bytes on the wire");
static_assert(offsetof(FrameHeader, key) == 8 && offsetof(FrameHeader, round) == 24 &&
                  offsetof(FrameHeader, payload_bytes) == 32,
              "frame header fields moved: the layout is the wire format");

// What a frame carries, as far as the transport cares.
enum class FrameKind {
  kData,    // payload up to kMaxPayloadBytes; may fill a posted receive
  kText,    // payload up to kMaxErrorPayloadBytes of text (escaped before any handler sees it)
  kSignal,  // no payload
};

// What the protocol above tells the transport about its frames. Plain
// function pointers: a static table per protocol, no state.
struct FrameRules {
  const char* protocol = "";
  // The kind of a frame type; false for a type the protocol does not know.
  bool (*kind_of)(uint16_t type, FrameKind* kind) = nullptr;
  // The protocol's own checks of a header that passed framing; a message
  // naming the problem.
  Status (*check)(const FrameHeader& header) = nullptr;
  const char* (*type_name)(uint16_t type) = nullptr;
};

// Framing, then rules.check. Never throws, never allocates beyond the message.
Status ValidateFrame(const FrameHeader& header, const FrameRules& rules);
// The frame's kind (kText for a type the rules do not know: such a frame
// never passes ValidateFrame).
FrameKind KindOf(const FrameHeader& header, const FrameRules& rules);

}  // namespace transport
}  // namespace bps
