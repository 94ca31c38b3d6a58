// Translation between TensorFlow's vocabulary and the engine's C ABI
// (csrc/c_api/byteps_c.h): dtypes one way, status codes the other. Kept in one
// header so the kernel file reads as "submit, wait, finish" only.
#ifndef BYTEPS_NATIVE_TF_ENGINE_BRIDGE_H_
#define BYTEPS_NATIVE_TF_ENGINE_BRIDGE_H_

#include <cstdio>
#include <string>
#include <vector>

#include "c_api/byteps_c.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/types.pb.h"
#include "tensorflow/core/platform/errors.h"
#include "tensorflow/core/platform/status.h"

namespace byteps_native {
namespace tf_adapter {

// Returns false for dtypes the engine cannot sum; the op's type constraint
// already rejects those, this is the second line of defence.
inline bool ToEngineDtype(tensorflow::DataType dtype, int32_t* out) {
  switch (dtype) {
    case tensorflow::DT_FLOAT: *out = BPS_FLOAT32; return true;
    case tensorflow::DT_DOUBLE: *out = BPS_FLOAT64; return true;
    case tensorflow::DT_HALF: *out = BPS_FLOAT16; return true;
    case tensorflow::DT_BFLOAT16: *out = BPS_BFLOAT16; return true;
    case tensorflow::DT_INT32: *out = BPS_INT32; return true;
    case tensorflow::DT_INT64: *out = BPS_INT64; return true;
    case tensorflow::DT_UINT8: *out = BPS_UINT8; return true;
    default: return false;
  }
}

// Engine status codes become the TensorFlow error class a caller would test
// for: a dead peer is Unavailable (retryable by a supervisor), disagreement
// between ranks is InvalidArgument, an uninitialised engine is a
// FailedPrecondition that names the missing call.
// `timeout_seconds`: this process's deadline for the op (0: none), named in
// a deadline's error as TensorFlow's CommunicationOptions field.
inline std::string FormatTimeout(double seconds) {
  char text[32];
  snprintf(text, sizeof(text), "%g", seconds);
  return text;
}

inline absl::Status FromEngineStatus(int code, const std::string& tensor_name,
                                     const char* engine_message, double timeout_seconds = 0) {
  const std::string what = "BytePS push_pull of tensor '" + tensor_name +
                           "' failed: " +
                           (engine_message && *engine_message
                                ? engine_message
                                : "no message from the engine");
  switch (code) {
    case BPS_OK: return absl::OkStatus();
    case BPS_INVALID_ARGUMENT:
    case BPS_MISMATCH: return tensorflow::errors::InvalidArgument(what);
    case BPS_PEER_FAILURE: return tensorflow::errors::Unavailable(what);
    case BPS_TIMEOUT: return tensorflow::errors::DeadlineExceeded(what);
    case BPS_DEADLINE_EXCEEDED:
      // In the words of TensorFlow's own collective timeout.
      return tensorflow::errors::DeadlineExceeded(
          "Collective has timed out waiting for other processes: ", what,
          timeout_seconds > 0 ? " (timeout_seconds=" + FormatTimeout(timeout_seconds) + " on this process)" : "",
          ". Not every process submitted it in time (CommunicationOptions.timeout_seconds): a collective "
          "that only some processes call (uneven step counts, evaluate/predict/save on some processes only, "
          "a branch on the rank), a shape that differs between processes inside a traced function, or a "
          "stalled peer. The engine failed the round on every process; the name can be used again.");
    case BPS_CANCELLED: return tensorflow::errors::Cancelled(what);
    case BPS_SHUTDOWN: return tensorflow::errors::Aborted(what);
    case BPS_NOT_INITIALIZED:
      return tensorflow::errors::FailedPrecondition(
          what, " (call byteps_native.tf.init() before running BytePS ops)");
    default: return tensorflow::errors::Internal(what);
  }
}

// One member of a group submission (bps_push_pull_group_async): `input` in
// host memory or on `device`, its result into `output` (may be input's
// buffer). `dims` receives input's shape and must outlive the engine's use of
// it (until `done`), as `name` must until the submitting call returns.
inline bps_group_member GroupMemberOf(const tensorflow::Tensor& input, void* output, int32_t engine_dtype,
                                      int32_t device, std::vector<int64_t>* dims, const std::string& name,
                                      int32_t priority, int32_t reduce_op, bps_done_fn done, void* user_data) {
  for (int d = 0; d < input.dims(); ++d) dims->push_back(input.dim_size(d));
  bps_group_member m;
  m.input.data = const_cast<char*>(input.tensor_data().data());
  m.input.num_elements = input.NumElements();
  m.input.dtype = engine_dtype;
  m.input.device = device;
  m.input.ndim = static_cast<int32_t>(dims->size());
  m.input.shape = dims->empty() ? nullptr : dims->data();
  m.output = output;
  m.name = name.c_str();
  m.priority = priority;
  m.reduce_op = reduce_op;
  m.done = done;
  m.user_data = user_data;
  return m;
}

// The engine's join rule (bps_joined_ranks_check) on a summed round's output:
// FailedPrecondition, as Horovod raises, naming the joined ranks.
inline absl::Status CheckNoRankJoined(const std::string& engine_name, const tensorflow::Tensor& summed) {
  int32_t dtype = 0;
  if (summed.dims() == 0 || !ToEngineDtype(summed.dtype(), &dtype)) return absl::OkStatus();
  char text[1024];
  const size_t length = bps_joined_ranks_check(engine_name.c_str(), summed.tensor_data().data(), dtype,
                                               summed.dim_size(0), summed.NumElements(), text, sizeof(text));
  if (length == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(text);
}

}  // namespace tf_adapter
}  // namespace byteps_native

#endif  // BYTEPS_NATIVE_TF_ENGINE_BRIDGE_H_
