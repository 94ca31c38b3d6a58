// topk's selection on the host: the k largest |x| of x[0, n), ties to the
// lower index, ascending, in linear time (a radix select on the bit pattern
// of |x|: topk_element.h, whose per-element code topk.cu shares).
// benchmarks/topk_select_bench.sh measures it against the comparison sort
// (nth_element) it replaced.
#pragma once
#include <cstdint>
#include <vector>

namespace bps {

void TopKIndices(const float* x, uint32_t n, uint32_t k, std::vector<uint32_t>* out);

}  // namespace bps
