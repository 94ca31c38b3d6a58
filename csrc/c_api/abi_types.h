// The C ABI's plain types as the engine's own (csrc/common): the engine never
// sees byteps_c.h, and every value the two share is held equal here, at
// compile time, so a code, dtype or reduce op crosses the boundary unchanged.
#pragma once
#include <cstdint>
#include <type_traits>

#include "c_api/byteps_c.h"
#include "common/completion.h"
#include "common/dtype.h"
#include "common/reduce_op.h"
#include "common/status.h"
#include "common/tensor_view.h"

namespace bps {

#define BPS_SAME_VALUE(ours, theirs) \
  static_assert(static_cast<int64_t>(ours) == static_cast<int64_t>(theirs), #ours " must equal " #theirs)

BPS_SAME_VALUE(StatusCode::kOk, BPS_OK);
BPS_SAME_VALUE(StatusCode::kInvalidArgument, BPS_INVALID_ARGUMENT);
BPS_SAME_VALUE(StatusCode::kMismatch, BPS_MISMATCH);
BPS_SAME_VALUE(StatusCode::kPeerFailure, BPS_PEER_FAILURE);
BPS_SAME_VALUE(StatusCode::kTimeout, BPS_TIMEOUT);
BPS_SAME_VALUE(StatusCode::kShutdown, BPS_SHUTDOWN);
BPS_SAME_VALUE(StatusCode::kInternal, BPS_INTERNAL);
BPS_SAME_VALUE(StatusCode::kNotInitialized, BPS_NOT_INITIALIZED);
BPS_SAME_VALUE(StatusCode::kDeadlineExceeded, BPS_DEADLINE_EXCEEDED);
BPS_SAME_VALUE(StatusCode::kCancelled, BPS_CANCELLED);

BPS_SAME_VALUE(DataType::kFloat32, BPS_FLOAT32);
BPS_SAME_VALUE(DataType::kFloat64, BPS_FLOAT64);
BPS_SAME_VALUE(DataType::kFloat16, BPS_FLOAT16);
BPS_SAME_VALUE(DataType::kBFloat16, BPS_BFLOAT16);
BPS_SAME_VALUE(DataType::kInt32, BPS_INT32);
BPS_SAME_VALUE(DataType::kInt64, BPS_INT64);
BPS_SAME_VALUE(DataType::kUInt8, BPS_UINT8);
BPS_SAME_VALUE(kNumDataTypes, BPS_UINT8 + 1);  // a new dtype is added on both sides

BPS_SAME_VALUE(ReduceOp::kSum, BPS_REDUCE_SUM);
BPS_SAME_VALUE(ReduceOp::kAverage, BPS_REDUCE_AVERAGE);

#undef BPS_SAME_VALUE

// The adapter's callback is handed to the engine as is.
static_assert(std::is_same<DoneCallback, bps_done_fn>::value, "DoneCallback must be the C ABI's bps_done_fn");

inline TensorView ViewOf(const bps_tensor& t) {
  TensorView v;
  v.data = t.data;
  v.num_elements = t.num_elements;
  v.dtype = t.dtype;
  v.device = t.device;
  v.ndim = t.ndim;
  v.shape = t.shape;
  return v;
}

// Any int32 is held as is: validation names a value that is no ReduceOp.
inline ReduceOp ReduceOpOf(int32_t reduce_op) { return static_cast<ReduceOp>(reduce_op); }

// A code from the C side (an adapter's store): a bps_status_code.
inline StatusCode StatusCodeOf(int code) { return static_cast<StatusCode>(code); }

// What a bps_* call returns for `st`.
inline int AbiCode(const Status& st) { return static_cast<int>(st.code()); }

}  // namespace bps
