#include "torch/tensor_wire.h"

#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

namespace byteps_torch {
namespace {

// torch's Python spelling, so the message matches what the user wrote.
std::string PythonDtypeName(at::ScalarType type) {
  switch (type) {
    case at::kChar: return "torch.int8";
    case at::kShort: return "torch.int16";
    case at::kBool: return "torch.bool";
    case at::kComplexFloat: return "torch.complex64";
    case at::kComplexDouble: return "torch.complex128";
    case at::kComplexHalf: return "torch.complex32";
    case at::kUInt16: return "torch.uint16";
    case at::kUInt32: return "torch.uint32";
    case at::kUInt64: return "torch.uint64";
    default: return std::string("torch.") + c10::toString(type);
  }
}

}  // namespace

bps_dtype EngineDtype(at::ScalarType type, const char* operation) {
  switch (type) {
    case at::kFloat: return BPS_FLOAT32;
    case at::kDouble: return BPS_FLOAT64;
    case at::kHalf: return BPS_FLOAT16;
    case at::kBFloat16: return BPS_BFLOAT16;
    case at::kInt: return BPS_INT32;
    case at::kLong: return BPS_INT64;
    case at::kByte: return BPS_UINT8;
    default:
      TORCH_CHECK(false, "byteps ", operation, " does not support dtype ",
                  PythonDtypeName(type),
                  "; supported: float32, float64, float16, bfloat16, int32, int64, uint8. "
                  "Cast the tensor (e.g. tensor.to(torch.float32)) before the call.");
  }
}

const char* DtypeTag(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return "f32";
    case at::kDouble: return "f64";
    case at::kHalf: return "f16";
    case at::kBFloat16: return "bf16";
    case at::kInt: return "i32";
    case at::kLong: return "i64";
    case at::kByte: return "u8";
    default: return c10::toString(type);  // not reached for engine dtypes
  }
}

void CheckDense(const at::Tensor& tensor, const char* operation) {
  TORCH_CHECK(tensor.defined(), "byteps ", operation, " got an undefined tensor");
  TORCH_CHECK(tensor.layout() == at::kStrided, "byteps ", operation,
              " supports dense tensors only, got layout ", tensor.layout(),
              "; call .to_dense() first");
  TORCH_CHECK(tensor.device().is_cpu() || tensor.device().is_cuda(), "byteps ", operation,
              " got a tensor on ", tensor.device(), "; only CPU and CUDA tensors are supported: "
              "move it with .cpu() (and back)");
}

WireTensor WireTensor::ForReduction(const at::Tensor& user, const char* operation,
                                    c10::optional<at::ScalarType> wire_dtype) {
  CheckDense(user, operation);
  at::ScalarType type = wire_dtype.value_or(user.scalar_type());
  EngineDtype(type, operation);
  WireTensor result{user, user};
  if (type != user.scalar_type()) {
    result.wire = user.to(type, /*non_blocking=*/false, /*copy=*/true,
                          at::MemoryFormat::Contiguous);
    result.needs_copy_back = true;
  } else if (!user.is_contiguous()) {
    // Staged rather than rejected: the engine needs one flat buffer, the
    // copy back restores the caller's layout.
    result.wire = user.contiguous();
    result.needs_copy_back = true;
  }
  return result;
}

WireTensor WireTensor::ForDataMovement(const at::Tensor& user, const char* operation) {
  CheckDense(user, operation);
  WireTensor result{user, user};
  if (!user.is_contiguous()) {
    result.wire = user.contiguous();
    result.needs_copy_back = true;
  }
  if (result.wire.scalar_type() != at::kByte) {
    // Bytes of the same storage: a view, not a copy.
    result.wire = result.wire.reshape({-1}).view(at::kByte);
  }
  return result;
}

void WireTensor::CopyBack() {
  if (!needs_copy_back) return;
  at::Tensor source = wire;
  if (wire.scalar_type() == at::kByte && user.scalar_type() != at::kByte) {
    source = wire.view(user.scalar_type());  // undo the byte view of ForDataMovement
  }
  c10::DeviceGuard device(user.device());
  user.copy_(source.view(user.sizes()));
  if (wire.is_cuda()) {
    // Queued, not waited for: the caller completes a CUDA-aware Future on
    // this same current stream, so readers wait on an event after the copy
    // and no host thread blocks. The staging buffer is freed when the
    // handler returns; the allocator must not hand it out again before this
    // stream has read it (it was allocated on the caller's stream).
    wire.record_stream(c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(wire.device()));
  }
}

}  // namespace byteps_torch
