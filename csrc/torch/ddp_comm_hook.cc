#include "torch/ddp_comm_hook.h"

#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>

#include <exception>
#include <utility>
#include <vector>

#include "torch/push_pull.h"
#include "torch/tensor_wire.h"

namespace byteps_torch {
namespace {

// str(torch.float32) without the "torch." prefix, as the Python hook spells it.
std::string PythonDtypeSpelling(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kInt: return "int32";
    case at::kLong: return "int64";
    case at::kByte: return "uint8";
    default: return c10::toString(type);
  }
}

std::string WireSuffix(std::optional<at::ScalarType> wire_dtype) {
  if (!wire_dtype) return "";
  if (*wire_dtype == at::kHalf) return ".fp16";
  if (*wire_dtype == at::kBFloat16) return ".bf16";
  return std::string(".") + DtypeTag(*wire_dtype);
}

}  // namespace

std::string BucketName(const std::string& prefix, size_t index, const at::Tensor& buffer,
                       std::optional<at::ScalarType> wire_dtype) {
  return prefix + "ddp.bucket" + std::to_string(index) + "." + PythonDtypeSpelling(buffer.scalar_type()) +
         "." + std::to_string(buffer.numel()) + WireSuffix(wire_dtype);
}

PushPullCommHook::PushPullCommHook(std::string name_prefix, std::optional<at::ScalarType> wire_dtype)
    : name_prefix_(std::move(name_prefix)), wire_dtype_(wire_dtype) {
  if (wire_dtype_) EngineDtype(*wire_dtype_, "DDP push_pull hook");
}

c10::intrusive_ptr<c10::ivalue::Future> PushPullCommHook::runHook(c10d::GradBucket& bucket) {
  at::NoGradGuard no_grad;  // compression casts are data movement, not autograd
  const at::Tensor& buffer = bucket.getBuffer();
  WireTensor wire = WireTensor::ForReduction(buffer, "DDP push_pull hook", wire_dtype_);
  std::vector<c10::Device> devices;
  if (buffer.is_cuda()) devices.push_back(buffer.device());
  // Value type Tensor (not PyObject): the Reducer reads it in C++ through
  // parseHookResult, and a CUDA-aware Future orders its readers' streams.
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get(), std::move(devices));
  SubmitPushPull(wire.wire, BucketName(name_prefix_, bucket.getIndex(), buffer, wire_dtype_),
                 static_cast<int32_t>(bucket.getIndex()), BPS_REDUCE_AVERAGE, buffer.sizes(),
                 [future, wire](std::exception_ptr error) mutable {
                   if (!error) {
                     try {
                       wire.CopyBack();
                       future->markCompleted(c10::IValue(wire.user));
                       return;
                     } catch (...) {
                       error = std::current_exception();
                     }
                   }
                   future->setErrorIfNeeded(error);
                 });
  return future;
}

at::Tensor PushPullCommHook::parseHookResult(const c10::IValue& result) {
  TORCH_INTERNAL_ASSERT(result.isTensor(), "byteps DDP hook: the Future holds ", result.tagKind(),
                        ", expected the bucket tensor");
  return result.toTensor();
}

void RegisterPushPullCommHook(const std::shared_ptr<c10d::Reducer>& reducer, std::string name_prefix,
                              std::optional<at::ScalarType> wire_dtype) {
  TORCH_CHECK(reducer, "register_push_pull_hook: the model has no DDP reducer; pass a "
              "torch.nn.parallel.DistributedDataParallel model");
  reducer->register_comm_hook(std::make_unique<PushPullCommHook>(std::move(name_prefix), wire_dtype));
}

}  // namespace byteps_torch
