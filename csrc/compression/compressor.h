// Gradient compressors that travel through the parameter servers (issue 29):
// the worker compresses each pushed slice (with error feedback: what the
// compressor dropped is added to the next step's slice), the server
// decompresses every push, sums in float32, and answers the compressed sum
// (topk: the exact sum, up to machines x k entries: AnswerCodec), so each
// worker sends and receives the compressed size once.
//
// One implementation for every face (DDP hook, DistributedOptimizer,
// BytePSOps, the core API); float32 tensors only (others travel as they are).
//
// A compressed payload starts with a 16-byte CodecHeader, which also says
// what the ranks must agree on (kind, k, seed, error feedback, worker
// momentum): the server compares it between the pushes of a round. Then, for
// onebit of a fused tensor (a DDP bucket: CompressionSpec::segment_ends), the
// `cuts` uint32 offsets inside the slice where one of its tensors ends,
// ascending in (0, n): they split the slice into cuts + 1 segments, each with
// its own scale (the server compares them too). The bodies (little endian):
//   onebit   cuts + 1 float scales, then ceil(n/32) 4-byte words of sign bits:
//            bit i%8 of byte i/8 set when x[i] < 0 (padding zero);
//            decompressed x[i] = +-scale of i's segment, scale = mean(|x|)
//            over the segment (summed in double precision)
//   topk     k uint32 indices (ascending), then their k float values; the k
//            largest |x|, ties to the lower index (NaN counts as largest)
//   randomk  k float values at k distinct indices that every rank and the
//            server derive from (seed, key, round) (RandomIndices)
//
// Each codec is one file that registers itself (codec.h); this header is what
// they share. Their per-element code (*_element.h) is shared with their CUDA
// kernels (device_codec.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace bps {

class Codec;  // codec.h

// What a user asks for, per tensor name (bps_declare_compression).
struct CompressionSpec {
  const Codec* codec = nullptr;  // registered (codec.h); null: no compression
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
  // topk: the server answers the top k of the sum (BytePS's re-compression,
  // which drops what the machines' different choices add beyond k). Off (the
  // default): the exact sum of the pushes, every index a machine sent, in an
  // answer of up to machines x k entries (AnswerCodec).
  bool server_topk = false;
  // A fused tensor (a DDP bucket) declared with the sizes of its parts: their
  // ends, ascending, the last the tensor's count. onebit then keeps one scale
  // per part within each slice (a bucket's layers differ in gradient size by
  // orders of magnitude: one scale across them starves the small ones).
  // Null: the tensor is one part.
  std::shared_ptr<const std::vector<uint64_t>> segment_ends;
  bool enabled() const { return codec != nullptr; }
  bool operator==(const CompressionSpec& o) const {
    const bool same_segments = segment_ends == o.segment_ends ||
                               (segment_ends && o.segment_ends && *segment_ends == *o.segment_ends);
    return codec == o.codec && ratio == o.ratio && error_feedback == o.error_feedback && seed == o.seed &&
           momentum == o.momentum && nesterov == o.nesterov && server_error_feedback == o.server_error_feedback &&
           server_topk == o.server_topk && same_segments;
  }
};

// CompressionSpec::segment_ends from a fused tensor's part sizes, in order: a
// size of zero (an empty parameter) marks no boundary; null when fewer than
// two parts remain (the tensor is one part).
std::shared_ptr<const std::vector<uint64_t>> SegmentEndsOf(const std::vector<uint64_t>& sizes);

// "onebit", "topk:ratio=0.01", "randomk:ratio=0.05,seed=7", any with ",ef=0"
// (or ":ef=0") or ",momentum=0.9" (",nesterov=0": plain momentum) or
// ",server_ef=1"; "" or "none": no compression. Errors name the bad part.
Status ParseCompressionSpec(const std::string& text, CompressionSpec* spec);
std::string DescribeSpec(const CompressionSpec& spec);

// The first bytes of a compressed payload.
struct CodecHeader {
  uint8_t kind = 0;     // the codec's wire id (Codec::wire_id)
  uint8_t options = 0;  // bit 0: error feedback; 1: worker momentum; 2: nesterov; 3: server error feedback;
                        // 4: server top-k
  uint16_t cuts = 0;    // onebit: segment boundaries after the header (cuts + 1 scales)
  uint32_t count = 0;   // elements of the slice
  uint32_t k = 0;       // topk / randomk
  uint32_t seed = 0;    // randomk
};
static_assert(sizeof(CodecHeader) == 16, "codec header is part of the wire format");

// The offsets inside slice [offset, offset + count) of the tensor where one of
// the spec's segments ends (relative to the slice, ascending, in (0, count)):
// onebit's scale boundaries. Empty for one segment, other compressors, and
// undeclared segments; at most kMaxCuts (later parts then share a scale).
constexpr uint32_t kMaxCuts = 65535;
std::vector<uint32_t> SliceCuts(const CompressionSpec& spec, uint64_t offset, uint64_t count);
CodecHeader MakeCodecHeader(const CompressionSpec& spec, uint64_t count, size_t cuts = 0);
bool ServerErrorFeedback(const CodecHeader& h);
bool ServerTopK(const CodecHeader& h);  // CompressionSpec::server_topk
// The codec of the server's answer to pushes of `push` from `machines`
// machines: topk without server_topk answers the exact sum, whose nonzeros
// are among the machines' k indices each: k = min(count, machines x k)
// (ties among the zeros go to the lower index). Others: `push` itself.
CodecHeader AnswerCodec(const CodecHeader& push, uint32_t machines);
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
  const uint32_t* cuts = nullptr;  // CodecHeader::cuts of them (SliceCuts)
};

// With momentum first m = mu m + x and x' = x + mu m (nesterov) or m, else
// x' = x; then out = compress(x' + residual); residual = (x' + residual) -
// decompress(out) when `residual` is non-null (error feedback). `out` holds
// CompressedBytes(h) bytes. `key` and `round` choose randomk's indices.
void Compress(const CodecHeader& h, const float* x, const SliceState& state, uint64_t key, uint32_t round, char* out);
// Error feedback only (the server with server_ef=1, tests): no momentum.
inline void Compress(const CodecHeader& h, const float* x, float* residual, uint64_t key, uint32_t round, char* out,
                     const uint32_t* cuts = nullptr) {
  SliceState state;
  state.residual = residual;
  state.cuts = cuts;
  Compress(h, x, state, key, round, out);
}
// The segment boundaries a payload carries (CodecHeader::cuts of them).
const uint32_t* PayloadCuts(const char* payload);
// out = decompress(in) (zeros where topk/randomk sent nothing).
void Decompress(const char* in, uint64_t key, uint32_t round, float* out);
// acc += decompress(in): the server's sum.
void DecompressAdd(const char* in, uint64_t key, uint32_t round, float* acc);

}  // namespace bps
