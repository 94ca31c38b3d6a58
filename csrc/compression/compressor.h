// Gradient compressors that travel through the parameter servers (issue 29):
// the worker compresses each pushed slice (with error feedback: what the
// compressor dropped is added to the next step's slice), the server
// decompresses every push, sums in float32, and answers the compressed sum,
// so each worker sends and receives the compressed size once.
//
// One implementation for every face (DDP hook, DistributedOptimizer,
// BytePSOps, the core API); float32 tensors only (others travel as they are).
//
// A compressed payload starts with a 16-byte CodecHeader, which also says
// what the ranks must agree on (kind, k, seed, error feedback, worker
// momentum): the server compares it between the pushes of a round. The bodies
// (little endian):
//   onebit   float scale, then ceil(n/32) 4-byte words of sign bits: bit i%8
//            of byte i/8 set when x[i] < 0 (padding zero); decompressed
//            x[i] = +-scale, scale = mean(|x|) (summed in double precision)
//   topk     k uint32 indices (ascending), then their k float values; the k
//            largest |x|, ties to the lower index
//   randomk  k float values at k distinct indices that every rank and the
//            server derive from (seed, key, round) (RandomIndices)
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace bps {

enum class CompressorKind : uint8_t { kNone = 0, kOneBit = 1, kTopK = 2, kRandomK = 3 };
const char* CompressorName(CompressorKind kind);

// What a user asks for, per tensor name (bps_declare_compression).
struct CompressionSpec {
  CompressorKind kind = CompressorKind::kNone;
  double ratio = 0.01;        // topk / randomk: k = max(1, floor(n * ratio))
  bool error_feedback = true;  // kept on the worker, per partition slice
  uint32_t seed = 0;           // randomk
  // Momentum on the worker, before error feedback and the compressor
  // (BytePS's momentum_type / momentum_mu): m = mu m + g, then the slice
  // compressed is g + mu m (nesterov) or m. 0: none. The optimizer must then
  // run without momentum of its own.
  double momentum = 0;
  bool nesterov = true;
  // The server keeps error feedback on the sum it re-compresses, per key
  // (BytePS's servers with an ef_type); off: the server keeps no state.
  bool server_error_feedback = false;
  bool enabled() const { return kind != CompressorKind::kNone; }
  bool operator==(const CompressionSpec& o) const {
    return kind == o.kind && ratio == o.ratio && error_feedback == o.error_feedback && seed == o.seed &&
           momentum == o.momentum && nesterov == o.nesterov && server_error_feedback == o.server_error_feedback;
  }
};

// "onebit", "topk:ratio=0.01", "randomk:ratio=0.05,seed=7", any with ",ef=0"
// (or ":ef=0") or ",momentum=0.9" (",nesterov=0": plain momentum) or
// ",server_ef=1"; "" or "none": no compression. Errors name the bad part.
Status ParseCompressionSpec(const std::string& text, CompressionSpec* spec);
std::string DescribeSpec(const CompressionSpec& spec);

// The first bytes of a compressed payload.
struct CodecHeader {
  uint8_t kind = 0;     // CompressorKind
  uint8_t options = 0;  // bit 0: error feedback; 1: worker momentum; 2: nesterov; 3: server error feedback
  uint16_t reserved = 0;
  uint32_t count = 0;   // elements of the slice
  uint32_t k = 0;       // topk / randomk
  uint32_t seed = 0;    // randomk
};
static_assert(sizeof(CodecHeader) == 16, "codec header is part of the wire format");

CodecHeader MakeCodecHeader(const CompressionSpec& spec, uint64_t count);
bool ServerErrorFeedback(const CodecHeader& h);
// Bytes of the whole compressed payload (header included).
uint64_t CompressedBytes(const CodecHeader& h);
// Checks a received payload (header, size, topk's indices in range) before
// anything decodes it; empty when fine, else what is wrong.
std::string ValidateCompressed(const char* payload, uint64_t payload_bytes);
std::string DescribeCodec(const CodecHeader& h);

// k distinct indices of [0, n), ascending, from a splitmix64 stream seeded by
// (seed, key, round) through Floyd's sampling (tests/core reproduces it).
void RandomIndices(uint32_t seed, uint64_t key, uint32_t round, uint32_t n, uint32_t k, std::vector<uint32_t>* out);

// A worker's state of one compressed slice across steps; null: none.
struct SliceState {
  float* residual = nullptr;  // error feedback
  float* momentum = nullptr;  // CompressionSpec::momentum
  float mu = 0;
  bool nesterov = true;
};

// With momentum first m = mu m + x and x' = x + mu m (nesterov) or m, else
// x' = x; then out = compress(x' + residual); residual = (x' + residual) -
// decompress(out) when `residual` is non-null (error feedback). `out` holds
// CompressedBytes(h) bytes. `key` and `round` choose randomk's indices.
void Compress(const CodecHeader& h, const float* x, const SliceState& state, uint64_t key, uint32_t round, char* out);
// Error feedback only (the server with server_ef=1, tests): no momentum.
inline void Compress(const CodecHeader& h, const float* x, float* residual, uint64_t key, uint32_t round, char* out) {
  SliceState state;
  state.residual = residual;
  Compress(h, x, state, key, round, out);
}
// out = decompress(in) (zeros where topk/randomk sent nothing).
void Decompress(const char* in, uint64_t key, uint32_t round, float* out);
// acc += decompress(in): the server's sum.
void DecompressAdd(const char* in, uint64_t key, uint32_t round, float* acc);

}  // namespace bps
