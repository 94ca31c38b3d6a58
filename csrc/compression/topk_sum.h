// The servers' sum of topk pushes, kept sparse (issue 39: topk that costs
// less than it saves). Without server_topk the answer is the exact sum of the
// machines' entries as a topk payload of k' = min(count, machines x k)
// entries. The dense way decodes every push into a zeroed slice (touching all
// `count` floats) and selects its top k' again (a radix select over all of
// them): O(count) per round on a server thread, where the pushes hold only
// machines x k entries. This sum merges the pushes' ascending index lists as
// they arrive and writes the same answer from them in O(machines x k).
//
// Byte for byte the dense path's payload (tests/cpp/topk_sum_test.cc):
//   - each index's value is +0.0f plus its pushes' values in arrival order,
//     as Decode (zeros, then DecodeAdd) and DecodeAdd give it;
//   - the chosen entries are every nonzero sum (at most k' of them: the
//     radix select's keys above zero) and then, to fill k', the lowest
//     indices whose sum is zero or that no push named (the select's tie rule
//     among equal keys: lower index first), all written as +0.0f, which is
//     what a zero sum is (0.0f + v + -v and 0.0f + -0.0f are +0.0f);
//   - indices ascending.
// A push whose indices are not strictly ascending (no encoder of ours sends
// one; ValidateBody only checks their range) makes Add return false: the
// caller then sums that round densely.
#pragma once
#include <cstdint>
#include <vector>

#include "compression/compressor.h"

namespace bps {

// Whether a server sums rounds of `push` with SparseTopKSum: topk answering
// the exact sum (no server_topk, no server error feedback, which need the
// dense sum).
bool SumsSparsely(const CodecHeader& push);

class SparseTopKSum {
 public:
  // Forgets the round's entries (keeps the memory).
  void Clear() { entries_.clear(); }
  // Adds one push's body (`k` indices, ascending, then `k` values) of a
  // slice of `count` elements. False, and nothing added, when its indices
  // are not strictly ascending or out of range.
  bool Add(const char* body, uint32_t k, uint32_t count);
  // Writes the answer's body (answer.k indices, then answer.k values) for a
  // slice of answer.count elements.
  void WriteAnswer(const CodecHeader& answer, char* body) const;
  size_t entries() const { return entries_.size(); }

 private:
  struct Entry {
    uint32_t index;
    float value;
  };
  std::vector<Entry> entries_;  // ascending indices, the sums so far
  std::vector<Entry> merged_;   // scratch of Add
};

}  // namespace bps
