#include "compression/topk_select.h"

#include "compression/topk_element.h"

namespace bps {
namespace {

// Calls fn(i, key) for each i in [0, n) whose key is at least `floor`, in
// index order. Blocks of 16 are first tested together (a loop the compiler
// vectorizes): at topk's ratios almost no block holds such a key.
template <typename Fn>
inline void ForEachKeyAtLeast(const float* x, uint32_t n, uint32_t floor, Fn fn) {
  constexpr uint32_t kBlock = 16;
  uint32_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    uint32_t any = 0;
    for (uint32_t j = 0; j < kBlock; ++j) any |= element::TopKKey(x[i + j]) >= floor;
    if (!any) continue;
    for (uint32_t j = i; j < i + kBlock; ++j) {
      const uint32_t key = element::TopKKey(x[j]);
      if (key >= floor) fn(j, key);
    }
  }
  for (; i < n; ++i) {
    const uint32_t key = element::TopKKey(x[i]);
    if (key >= floor) fn(i, key);
  }
}

// The threshold of the k largest keys and how many of the keys equal to it
// are taken (the rest of the k lie above it). Three passes of histograms,
// the first over every element, the others over the candidates left: the
// elements whose key agrees with the digits found so far, gathered once
// after the first pass (usually a few hundredths of the slice or less).
struct Threshold {
  uint32_t key = 0;
  uint32_t equal_taken = 0;
};

Threshold FindThreshold(const float* x, uint32_t n, uint32_t k) {
  thread_local std::vector<uint32_t> candidates;
  uint32_t histogram[element::kTopKMaxBins];
  uint32_t prefix = 0, wanted = k;
  for (int pass = 0; pass < element::kTopKPasses; ++pass) {
    const uint32_t bins = element::TopKDigitBins(pass);
    for (uint32_t b = 0; b < bins; ++b) histogram[b] = 0;
    if (pass == 0) {
      for (uint32_t i = 0; i < n; ++i) ++histogram[element::TopKDigit(element::TopKKey(x[i]), 0)];
    } else {
      for (uint32_t key : candidates) ++histogram[element::TopKDigit(key, pass)];
    }
    uint32_t bin = 0, above = 0;
    element::TopKPickBin(histogram, bins, wanted, &bin, &above);
    wanted -= above;
    prefix |= bin << element::TopKDigitShift(pass);
    if (pass + 1 == element::kTopKPasses) break;
    // The next pass sees only the keys in this pass's bin.
    if (pass == 0) {
      candidates.clear();
      candidates.reserve(histogram[bin]);
      ForEachKeyAtLeast(x, n, prefix, [&](uint32_t, uint32_t key) {
        if (element::TopKMatchesPrefix(key, prefix, 1)) candidates.push_back(key);
      });
    } else {
      uint32_t kept = 0;
      for (uint32_t key : candidates) {
        if (element::TopKMatchesPrefix(key, prefix, pass + 1)) candidates[kept++] = key;
      }
      candidates.resize(kept);
    }
  }
  return Threshold{prefix, wanted};
}

}  // namespace

void TopKIndices(const float* x, uint32_t n, uint32_t k, std::vector<uint32_t>* out) {
  out->clear();
  if (k >= n) {
    out->resize(n);
    for (uint32_t i = 0; i < n; ++i) (*out)[i] = i;
    return;
  }
  out->reserve(k);
  if (k == 0) return;
  const Threshold t = FindThreshold(x, n, k);
  // In index order, so the output is ascending and ties go to the lower index.
  // Keys below the threshold are never chosen and count no tie.
  uint32_t equal_seen = 0;
  ForEachKeyAtLeast(x, n, t.key, [&](uint32_t i, uint32_t key) {
    if (element::TopKChosen(key, t.key, equal_seen, t.equal_taken)) out->push_back(i);
    equal_seen += key == t.key;
  });
}

}  // namespace bps
