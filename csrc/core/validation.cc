#include "core/validation.h"

#include "common/dtype.h"

namespace bps {

Status ValidatePushPull(const TensorView& input, const void* output, const std::string& name, ReduceOp reduce_op,
                        DoneCallback done) {
  if (!IsValidDataType(input.dtype)) {
    return Status::Invalid("tensor '" + name + "': unsupported dtype code " + std::to_string(input.dtype) +
                           " (supported: float32, float64, float16, bfloat16, int32, int64, uint8)");
  }
  if (name.empty()) return Status::Invalid("push_pull needs a non-empty tensor name");
  if (input.num_elements < 0 || (input.num_elements > 0 && (!input.data || !output))) {
    return Status::Invalid("tensor '" + name + "': null data or negative size");
  }
  if (reduce_op != ReduceOp::kSum && reduce_op != ReduceOp::kAverage) {
    return Status::Invalid("tensor '" + name + "': unsupported reduce op " + std::to_string(static_cast<int32_t>(reduce_op)) +
                           " (only sum and average)");
  }
  if (!done) return Status::Invalid("push_pull needs a completion callback");
  return Status::OK();
}

}  // namespace bps
