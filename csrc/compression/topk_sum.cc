#include "compression/topk_sum.h"

#include <cstring>

#include "compression/codec.h"

namespace bps {

bool SumsSparsely(const CodecHeader& push) {
  const Codec* codec = FindCodec(push.kind);
  return codec && std::strcmp(codec->name(), "topk") == 0 && !ServerTopK(push) && !ServerErrorFeedback(push);
}

bool SparseTopKSum::Add(const char* body, uint32_t k, uint32_t count) {
  const char* indices = body;
  const char* values = body + uint64_t{k} * sizeof(uint32_t);
  // Check before touching the sum: a bad push leaves it as it was.
  uint32_t previous = 0;
  for (uint32_t j = 0; j < k; ++j) {
    uint32_t index;
    memcpy(&index, indices + uint64_t{j} * sizeof(uint32_t), sizeof(index));
    if (index >= count || (j > 0 && index <= previous)) return false;
    previous = index;
  }
  merged_.clear();
  merged_.reserve(entries_.size() + k);
  size_t a = 0;
  for (uint32_t j = 0; j < k; ++j) {
    uint32_t index;
    float value;
    memcpy(&index, indices + uint64_t{j} * sizeof(uint32_t), sizeof(index));
    memcpy(&value, values + uint64_t{j} * sizeof(float), sizeof(value));
    while (a < entries_.size() && entries_[a].index < index) merged_.push_back(entries_[a++]);
    if (a < entries_.size() && entries_[a].index == index) {
      merged_.push_back(Entry{index, entries_[a++].value + value});
    } else {
      merged_.push_back(Entry{index, 0.0f + value});  // as DecodeAdd into zeros
    }
  }
  while (a < entries_.size()) merged_.push_back(entries_[a++]);
  entries_.swap(merged_);
  return true;
}

void SparseTopKSum::WriteAnswer(const CodecHeader& answer, char* body) const {
  char* out_indices = body;
  char* out_values = body + uint64_t{answer.k} * sizeof(uint32_t);
  uint32_t nonzero = 0;
  for (const Entry& e : entries_) nonzero += e.value != 0.0f;  // NaN counts: it is not zero
  uint32_t fill = answer.k > nonzero ? answer.k - nonzero : 0;
  // One walk over the indices in order: every nonzero sum, and the lowest
  // zero positions (no entry, or an entry summing to zero) while fill lasts.
  uint32_t written = 0;
  size_t e = 0;
  auto put = [&](uint32_t index, float value) {
    memcpy(out_indices + uint64_t{written} * sizeof(uint32_t), &index, sizeof(index));
    memcpy(out_values + uint64_t{written} * sizeof(float), &value, sizeof(value));
    ++written;
  };
  for (uint32_t i = 0; i < answer.count && written < answer.k; ++i) {
    if (e < entries_.size() && entries_[e].index == i) {
      const float value = entries_[e++].value;
      if (value != 0.0f) {
        put(i, value);
        continue;
      }
    } else if (fill == 0) {
      // No more zeros wanted: jump to the next entry.
      if (e == entries_.size()) break;
      i = entries_[e].index - 1;
      continue;
    }
    if (fill > 0) {
      put(i, 0.0f);
      --fill;
    }
  }
}

}  // namespace bps
