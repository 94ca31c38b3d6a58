// A compressor as the engine and the servers see it: one implementation per
// file (onebit.cc, topk.cc, randomk.cc) that registers itself here by name
// and wire id, at load time. compressor.cc holds what every codec shares
// (the spec's grammar, the codec header, momentum and error feedback) and
// asks the registry for the rest; nothing switches on a codec. Adding one:
// docs/compression.md, "Adding a codec".
//
// Built as part of a static library, a codec's file would be dropped by the
// linker (nothing refers to it by name): the test build links the
// compression layer's objects straight into its binaries
// (tests/cpp/CMakeLists.txt), as the Python build links every object.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "compression/compressor.h"

namespace bps {

class Codec {
 public:
  // The parts of CompressionSpec a codec takes; the others are refused when
  // given (the grammar is compressor.cc's, the same for every codec).
  enum Option : uint32_t {
    kRatio = 1,       // k = max(1, floor(n * ratio)) values per slice (CodecHeader::k)
    kSeed = 2,        // CodecHeader::seed
    kServerTopK = 4,  // CompressionSpec::server_topk
    kSegments = 8,    // a scale per declared segment (CodecHeader::cuts)
  };

  virtual ~Codec() = default;
  virtual const char* name() const = 0;
  // CodecHeader::kind: part of the wire format, never reused.
  virtual uint8_t wire_id() const = 0;
  virtual uint32_t options() const = 0;
  bool takes(Option o) const { return (options() & o) != 0; }

  // Bytes after the header and the segment boundaries.
  virtual uint64_t BodyBytes(const CodecHeader& h) const = 0;
  // body = compress(c); when `residual` is non-null it holds c (error
  // feedback) and becomes c - decompress(body). `cuts`: h.cuts boundaries.
  virtual void Encode(const CodecHeader& h, const float* c, const uint32_t* cuts, uint64_t key, uint32_t round,
                      float* residual, char* body) const = 0;
  // acc += decompress(body); Decode: out = decompress(body).
  virtual void DecodeAdd(const CodecHeader& h, const uint32_t* cuts, const char* body, uint64_t key, uint32_t round,
                         float* acc) const = 0;
  virtual void Decode(const CodecHeader& h, const uint32_t* cuts, const char* body, uint64_t key, uint32_t round,
                      float* out) const;
  // What is wrong with a received body whose size and header are checked
  // already (topk: an index out of range); empty when fine.
  virtual std::string ValidateBody(const CodecHeader& h, const char* body) const { return ""; }
  // The codec of the server's answer to pushes of `push` from `machines`.
  virtual CodecHeader Answer(const CodecHeader& push, uint32_t machines) const { return push; }
};

// Registers a codec for the life of the process (codecs are static objects
// of their own files); a second codec with a taken name or wire id aborts
// with both names. Returns true, for `static const bool registered = ...`.
bool RegisterCodec(const Codec* codec);
// Null when none has that name / wire id.
const Codec* FindCodec(const std::string& name);
const Codec* FindCodec(uint8_t wire_id);
// Every registered codec, by wire id.
std::vector<const Codec*> RegisteredCodecs();

}  // namespace bps
