// How a push_pull combines the ranks' tensors.
#pragma once
#include <cstdint>

namespace bps {

// The values are the C ABI's bps_reduce_op (c_api/abi_types.h holds the two
// together). A caller's value is checked once, at submission
// (core/validation.h), so the engine holds any int32 here until then.
enum class ReduceOp : int32_t {
  kSum = 0,
  // The sum divided by the job's size. Integer dtypes divide with C++
  // truncation toward zero (docs/env.md).
  kAverage = 1,
};

}  // namespace bps
