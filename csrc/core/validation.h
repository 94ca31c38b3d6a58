// The checks every push_pull submission passes before it is accepted, host
// or device tensor alike (csrc/core/engine.cc): one place, so both reject
// bad input with the same words.
#pragma once
#include <string>

#include "c_api/byteps_c.h"
#include "common/status.h"

namespace bps {

Status ValidatePushPull(const bps_tensor& input, const void* output, const std::string& name, int32_t reduce_op,
                        bps_done_fn done);

}  // namespace bps
