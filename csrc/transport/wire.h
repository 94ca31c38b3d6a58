// The wire format between workers and servers. Every frame starts with a
// fixed 64-byte header that is validated (magic, version, type, dtype,
// lengths) before any byte of payload is read or any memory is allocated.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/dtype.h"
#include "common/status.h"

namespace bps {

constexpr uint32_t kWireMagic = 0x4E535042;  // "BPSN" little-endian
// 2: the push header carries what every rank must agree on (flags,
// partition size) and a 32-bit shape signature.
// 3: a push may be compressed (kFlagCompressed; the payload opens with the
// codec's header, csrc/compression/compressor.h), and so is its answer.
constexpr uint16_t kWireVersion = 3;
// Largest data payload accepted from a peer: a partition slice. Bigger frames
// close the connection (a peer that sends them is broken or hostile).
constexpr uint64_t kMaxPayloadBytes = uint64_t(1) << 31;
constexpr uint64_t kMaxErrorPayloadBytes = 64 * 1024;

enum class MessageType : uint16_t {
  kPush = 1,      // worker -> server: one slice of one partition for a round
  kResponse = 2,  // server -> worker: the reduced slice for that round
  kError = 3,     // either way: payload is a UTF-8 message; key 0 = whole job
  kBye = 4,       // worker -> server: orderly shutdown
  kHeartbeat = 5,
};

// MessageHeader::flags.
enum WireFlags : uint8_t {
  kFlagAverage = 1,      // push: the sender averages (else sums) this tensor
  kFlagAsync = 2,        // push: the sender runs BYTEPS_ENABLE_ASYNC=1
  kFlagTensorError = 4,  // error: concerns the tensor `name_hash` only, not the job
  kFlagCompressed = 8,   // push/response: the payload is compressed float32 (CodecHeader first)
};

// Every field sits at a multiple of its size, so the layout has no padding
// without packing; not packed, so the header is 8-byte aligned wherever it is
// kept and references to its fields are aligned (UBSan reported misaligned
// binding of `key` when the struct was packed and placed at an odd address).
struct MessageHeader {
  uint32_t magic = kWireMagic;
  uint16_t version = kWireVersion;
  uint16_t type = 0;
  uint64_t key = 0;           // partition-slice key, derived from the tensor name
  uint64_t name_hash = 0;     // the tensor's name hash (errors poison the whole tensor)
  uint32_t round = 0;         // how many times this key was reduced before
  uint32_t partition = 0;     // partition index (for messages)
  uint64_t payload_bytes = 0;
  uint32_t sender_rank = 0;
  uint8_t dtype = 0;
  uint8_t flags = 0;          // WireFlags
  uint16_t num_contributors = 0;  // pushes per round for this key (machines)
  uint32_t signature = 0;     // hash of the tensor's dtype, shape and reduce op
  uint32_t partition_bytes = 0;  // the sender's BYTEPS_PARTITION_BYTES (push)
  uint64_t tensor_bytes = 0;  // the whole tensor's size
};
static_assert(sizeof(MessageHeader) == 64, "wire header must stay 64 bytes");
static_assert(offsetof(MessageHeader, key) == 8 && offsetof(MessageHeader, payload_bytes) == 32 &&
                  offsetof(MessageHeader, num_contributors) == 46 && offsetof(MessageHeader, tensor_bytes) == 56,
              "wire header fields moved: the layout is the wire format");

// Checks everything that can be checked without context. Returns a message
// naming the problem (never throws, never allocates beyond the message).
Status ValidateHeader(const MessageHeader& h);

const char* MessageTypeName(uint16_t type);

}  // namespace bps
