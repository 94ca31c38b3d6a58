// The parameter-server protocol between workers and servers: the message
// kinds and what a push and its answer say about the tensor (dtype, shape
// signature, sizes, how every rank reduces it). It rides on transport
// framing (csrc/transport/framing.h): the same 64-byte header, whose framing
// fields the transport reads and whose other fields are defined here.
// Bump kWireVersion (transport/framing.h) when anything here changes:
// 2: the push header carries what every rank must agree on (flags,
// partition size) and a 32-bit shape signature.
// 3: a push may be compressed (kFlagCompressed; the payload opens with the
// codec's header, csrc/compression/compressor.h), and so is its answer.
// 4: a server acknowledges every push as soon as its payload arrived
// (kReceived), before it can answer: the worker's scheduling credit for the
// push comes back then (csrc/core/credit_window.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/dtype.h"
#include "common/status.h"
#include "transport/framing.h"

namespace bps {

enum class MessageType : uint16_t {
  kPush = 1,      // worker -> server: one slice of one partition for a round
  kResponse = 2,  // server -> worker: the reduced slice for that round
  kError = 3,     // either way: payload is a UTF-8 message; key 0 = whole job
  kBye = 4,       // worker -> server: orderly shutdown
  kHeartbeat = 5,
  kReceived = 6,  // server -> worker: the push (key, round) arrived whole; no payload
};

// MessageHeader::flags.
enum WireFlags : uint8_t {
  kFlagAverage = 1,      // push: the sender averages (else sums) this tensor
  kFlagAsync = 2,        // push: the sender runs BYTEPS_ENABLE_ASYNC=1
  kFlagTensorError = 4,  // error: concerns the tensor `name_hash` only, not the job
  kFlagCompressed = 8,   // push/response: the payload is compressed float32 (CodecHeader first)
};

// The frame header as the protocol reads it. Every field sits at a multiple
// of its size, so the layout has no padding without packing; not packed, so
// the header is 8-byte aligned wherever it is kept and references to its
// fields are aligned (UBSan reported misaligned binding of `key` when the
// struct was packed and placed at an odd address).
struct MessageHeader {
  uint32_t magic = kWireMagic;   // framing
  uint16_t version = kWireVersion;  // framing
  uint16_t type = 0;             // framing: a MessageType
  uint64_t key = 0;              // framing: partition-slice key, derived from the tensor name
  uint64_t name_hash = 0;        // the tensor's name hash (errors poison the whole tensor)
  uint32_t round = 0;            // framing: how many times this key was reduced before
  uint32_t partition = 0;        // partition index (for messages)
  uint64_t payload_bytes = 0;    // framing
  uint32_t sender_rank = 0;
  uint8_t dtype = 0;
  uint8_t flags = 0;             // WireFlags
  uint16_t num_contributors = 0;  // pushes per round for this key (machines)
  uint32_t signature = 0;        // hash of the tensor's dtype, shape and reduce op
  uint32_t partition_bytes = 0;  // the sender's BYTEPS_PARTITION_BYTES (push)
  uint64_t tensor_bytes = 0;     // the whole tensor's size
};
static_assert(sizeof(MessageHeader) == kFrameHeaderBytes, "wire header must stay 64 bytes");
static_assert(offsetof(MessageHeader, key) == 8 && offsetof(MessageHeader, payload_bytes) == 32 &&
                  offsetof(MessageHeader, num_contributors) == 46 && offsetof(MessageHeader, tensor_bytes) == 56,
              "wire header fields moved: the layout is the wire format");
static_assert(offsetof(MessageHeader, magic) == offsetof(transport::FrameHeader, magic) &&
                  offsetof(MessageHeader, version) == offsetof(transport::FrameHeader, version) &&
                  offsetof(MessageHeader, type) == offsetof(transport::FrameHeader, type) &&
                  offsetof(MessageHeader, key) == offsetof(transport::FrameHeader, key) &&
                  offsetof(MessageHeader, round) == offsetof(transport::FrameHeader, round) &&
                  offsetof(MessageHeader, payload_bytes) == offsetof(transport::FrameHeader, payload_bytes),
              "the protocol's header must keep the framing fields where the transport reads them");

// The same 64 bytes, seen by the transport or by the protocol.
inline transport::FrameHeader ToFrame(const MessageHeader& h) {
  transport::FrameHeader f;
  memcpy(&f, &h, sizeof(f));
  return f;
}
inline MessageHeader FromFrame(const transport::FrameHeader& f) {
  MessageHeader h;
  memcpy(&h, &f, sizeof(h));
  return h;
}

// What the transport is told about this protocol's frames: pushes and
// responses are data, errors are text, bye and heartbeat carry nothing; a
// data frame's dtype must be valid, its payload a whole number of elements,
// and a push must say how many pushes its round takes.
const transport::FrameRules& PsFrameRules();

// Checks everything that can be checked without context: framing, then the
// protocol's fields. Returns a message naming the problem (never throws,
// never allocates beyond the message).
Status ValidateHeader(const MessageHeader& h);

const char* MessageTypeName(uint16_t type);

}  // namespace bps
