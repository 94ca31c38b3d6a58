// The checks every push_pull submission passes before it is accepted, host
// or device tensor alike (csrc/core/engine.cc): one place, so both reject
// bad input with the same words.
#pragma once
#include <string>

#include "common/completion.h"
#include "common/reduce_op.h"
#include "common/tensor_view.h"
#include "common/status.h"

namespace bps {

Status ValidatePushPull(const TensorView& input, const void* output, const std::string& name, ReduceOp reduce_op,
                        DoneCallback done);

}  // namespace bps
