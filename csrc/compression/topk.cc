// topk: the k largest |x| of each slice (k = max(1, floor(n * ratio))), ties
// to the lower index: k uint32 indices, ascending, then their k float values.
// The servers answer the exact sum of the machines' choices (up to
// machines x k entries) unless server_topk asks for the top k of the sum.
// Selection: topk_select.h (linear time), per-element code topk_element.h,
// shared with topk.cu.
#include <algorithm>
#include <cstring>
#include <string>

#include "compression/codec.h"
#include "compression/topk_select.h"

namespace bps {
namespace {

class TopKCodec : public Codec {
 public:
  const char* name() const override { return "topk"; }
  uint8_t wire_id() const override { return 2; }
  uint32_t options() const override { return kRatio | kServerTopK; }

  uint64_t BodyBytes(const CodecHeader& h) const override { return uint64_t{h.k} * (sizeof(uint32_t) + sizeof(float)); }

  void Encode(const CodecHeader& h, const float* c, const uint32_t* cuts, uint64_t key, uint32_t round,
              float* residual, char* body) const override {
    thread_local std::vector<uint32_t> chosen;
    TopKIndices(c, h.count, h.k, &chosen);
    uint32_t* indices = reinterpret_cast<uint32_t*>(body);
    float* values = reinterpret_cast<float*>(body + uint64_t{h.k} * sizeof(uint32_t));
    for (uint32_t i = 0; i < h.k; ++i) {
      indices[i] = chosen[i];
      values[i] = c[chosen[i]];
    }
    if (residual) {
      for (uint32_t i : chosen) residual[i] = 0.0f;  // sent exactly: nothing left over
    }
  }

  void DecodeAdd(const CodecHeader& h, const uint32_t* cuts, const char* body, uint64_t key, uint32_t round,
                 float* acc) const override {
    const uint32_t* indices = reinterpret_cast<const uint32_t*>(body);
    const float* values = reinterpret_cast<const float*>(body + uint64_t{h.k} * sizeof(uint32_t));
    for (uint32_t i = 0; i < h.k; ++i) acc[indices[i]] += values[i];
  }

  // Indices in range and ascending, as every encoder writes them (the
  // servers' sparse sum merges them in order: topk_sum.h).
  std::string ValidateBody(const CodecHeader& h, const char* body) const override {
    uint32_t previous = 0;
    for (uint32_t i = 0; i < h.k; ++i) {
      uint32_t index;
      memcpy(&index, body + uint64_t{i} * sizeof(uint32_t), sizeof(index));
      if (index >= h.count) return "topk push names element " + std::to_string(index) + " of " + std::to_string(h.count);
      if (i > 0 && index <= previous) {
        return "topk push names element " + std::to_string(index) + " after element " + std::to_string(previous) +
               ": its indices must ascend";
      }
      previous = index;
    }
    return "";
  }

  // Without server_topk the answer is the exact sum, whose nonzeros are
  // among the machines' k indices each (ties among the zeros go to the lower
  // index).
  CodecHeader Answer(const CodecHeader& push, uint32_t machines) const override {
    CodecHeader answer = push;
    if (!ServerTopK(push)) {
      answer.k = static_cast<uint32_t>(std::min<uint64_t>(push.count, uint64_t{push.k} * std::max(1u, machines)));
    }
    return answer;
  }
};

const TopKCodec kTopK;
const bool registered = RegisterCodec(&kTopK);

}  // namespace
}  // namespace bps
