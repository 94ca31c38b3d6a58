// onebit (signSGD with a scale, BytePS's onebit): a float scale per segment
// of the slice (mean |x| over it), then one sign bit per element. Wire
// format: compressor.h. The dense loops are onebit_kernels.h's (AVX2), the
// per-element definition onebit_element.h's, shared with onebit.cu.
#include <algorithm>
#include <cstring>

#include "compression/codec.h"
#include "compression/onebit_element.h"
#include "compression/onebit_kernels.h"

namespace bps {
namespace {

// Whole 32-bit words of sign bits: float32 frames carry multiples of 4 bytes.
uint64_t SignBytes(uint64_t n) { return (n + 31) / 32 * 4; }

// Segment [lo, hi) of a onebit payload: kernel(first, count) from its first
// element on a byte boundary of the sign bits (the kernels start at bit 0 of
// a byte), head(i) for each element before it.
template <typename Head, typename Kernel>
void OverSegment(uint32_t lo, uint32_t hi, Head head, Kernel kernel) {
  const uint32_t aligned = static_cast<uint32_t>(std::min<uint64_t>(hi, (uint64_t{lo} + 7) / 8 * 8));
  for (uint32_t i = lo; i < aligned; ++i) head(i);
  if (aligned < hi) kernel(aligned, hi - aligned);
}

class OneBitCodec : public Codec {
 public:
  const char* name() const override { return "onebit"; }
  uint8_t wire_id() const override { return 1; }
  uint32_t options() const override { return kSegments; }

  uint64_t BodyBytes(const CodecHeader& h) const override {
    return (uint64_t{h.cuts} + 1) * sizeof(float) + SignBytes(h.count);
  }

  void Encode(const CodecHeader& h, const float* c, const uint32_t* cuts, uint64_t key, uint32_t round,
              float* residual, char* body) const override {
    const uint32_t n = h.count;
    float* scales = reinterpret_cast<float*>(body);
    uint8_t* bits = Signs(h, body);
    onebit::PackSigns(c, n, bits);
    memset(bits + (n + 7) / 8, 0, SignBytes(n) - (n + 7) / 8);
    for (uint32_t s = 0; s <= h.cuts; ++s) {
      const uint32_t lo = element::OneBitSegmentBegin(cuts, s), hi = element::OneBitSegmentEnd(cuts, h.cuts, s, n);
      const float scale = element::OneBitScale(onebit::AbsSum(c + lo, hi - lo), hi - lo);
      scales[s] = scale;
      if (!residual) continue;
      OverSegment(
          lo, hi, [&](uint32_t i) { residual[i] -= element::OneBitSigned(bits, i, scale); },
          [&](uint32_t from, uint32_t len) { onebit::SubtractSigned(residual + from, bits + from / 8, len, scale); });
    }
  }

  void DecodeAdd(const CodecHeader& h, const uint32_t* cuts, const char* body, uint64_t key, uint32_t round,
                 float* acc) const override {
    const uint8_t* bits = Signs(h, body);
    ForEachSegment(h, cuts, body, [&](uint32_t lo, uint32_t hi, float scale) {
      OverSegment(
          lo, hi, [&](uint32_t i) { acc[i] += element::OneBitSigned(bits, i, scale); },
          [&](uint32_t from, uint32_t len) { onebit::AddSigned(acc + from, bits + from / 8, len, scale); });
    });
  }

  void Decode(const CodecHeader& h, const uint32_t* cuts, const char* body, uint64_t key, uint32_t round,
              float* out) const override {
    const uint8_t* bits = Signs(h, body);
    ForEachSegment(h, cuts, body, [&](uint32_t lo, uint32_t hi, float scale) {
      OverSegment(
          lo, hi, [&](uint32_t i) { out[i] = element::OneBitSigned(bits, i, scale); },
          [&](uint32_t from, uint32_t len) { onebit::UnpackSigns(bits + from / 8, len, scale, out + from); });
    });
  }

 private:
  template <typename Body>
  static Body* SignsOf(const CodecHeader& h, Body* body) {
    return body + (uint64_t{h.cuts} + 1) * sizeof(float);
  }
  static uint8_t* Signs(const CodecHeader& h, char* body) { return reinterpret_cast<uint8_t*>(SignsOf(h, body)); }
  static const uint8_t* Signs(const CodecHeader& h, const char* body) {
    return reinterpret_cast<const uint8_t*>(SignsOf(h, body));
  }
  // fn(lo, hi, scale) for each segment (the scales copied out: a received
  // payload need not be aligned).
  template <typename Fn>
  static void ForEachSegment(const CodecHeader& h, const uint32_t* cuts, const char* body, Fn fn) {
    for (uint32_t s = 0; s <= h.cuts; ++s) {
      float scale;
      memcpy(&scale, body + uint64_t{s} * sizeof(float), sizeof(scale));
      fn(element::OneBitSegmentBegin(cuts, s), element::OneBitSegmentEnd(cuts, h.cuts, s, h.count), scale);
    }
  }
};

const OneBitCodec kOneBit;
const bool registered = RegisterCodec(&kOneBit);

}  // namespace
}  // namespace bps
