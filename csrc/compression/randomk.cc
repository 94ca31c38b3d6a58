// randomk: k float values at k distinct indices (k = max(1, floor(n *
// ratio))) that every rank and server derives from (seed, key, round) and
// never sends. Per-element code randomk_element.h, shared with randomk.cu.
#include <algorithm>

#include "compression/codec.h"
#include "compression/randomk_element.h"

namespace bps {

void RandomIndices(uint32_t seed, uint64_t key, uint32_t round, uint32_t n, uint32_t k, std::vector<uint32_t>* out) {
  const uint64_t start = element::RandomKStreamStart(seed, key, round);
  thread_local std::vector<uint64_t> taken;
  taken.assign((uint64_t{n} + 63) / 64, 0);
  out->clear();
  out->reserve(k);
  auto has = [&](uint32_t i) { return (taken[i >> 6] >> (i & 63)) & 1; };
  auto add = [&](uint32_t i) {
    taken[i >> 6] |= uint64_t{1} << (i & 63);
    out->push_back(i);
  };
  for (uint64_t j = n - k; j < n; ++j) {  // Floyd: k distinct draws, k random numbers
    const uint32_t t = element::RandomKDraw(start, n, k, static_cast<uint32_t>(j));
    if (has(t)) {
      add(static_cast<uint32_t>(j));
    } else {
      add(t);
    }
  }
  std::sort(out->begin(), out->end());
}

namespace {

class RandomKCodec : public Codec {
 public:
  const char* name() const override { return "randomk"; }
  uint8_t wire_id() const override { return 3; }
  uint32_t options() const override { return kRatio | kSeed; }

  uint64_t BodyBytes(const CodecHeader& h) const override { return uint64_t{h.k} * sizeof(float); }

  void Encode(const CodecHeader& h, const float* c, const uint32_t* cuts, uint64_t key, uint32_t round,
              float* residual, char* body) const override {
    thread_local std::vector<uint32_t> chosen;
    RandomIndices(h.seed, key, round, h.count, h.k, &chosen);
    float* values = reinterpret_cast<float*>(body);
    for (uint32_t i = 0; i < h.k; ++i) values[i] = c[chosen[i]];
    if (residual) {
      for (uint32_t i : chosen) residual[i] = 0.0f;  // sent exactly: nothing left over
    }
  }

  void DecodeAdd(const CodecHeader& h, const uint32_t* cuts, const char* body, uint64_t key, uint32_t round,
                 float* acc) const override {
    thread_local std::vector<uint32_t> indices;
    RandomIndices(h.seed, key, round, h.count, h.k, &indices);
    const float* values = reinterpret_cast<const float*>(body);
    for (uint32_t i = 0; i < h.k; ++i) acc[indices[i]] += values[i];
  }
};

const RandomKCodec kRandomK;
const bool registered = RegisterCodec(&kRandomK);

}  // namespace
}  // namespace bps
