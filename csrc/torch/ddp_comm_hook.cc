#include "torch/ddp_comm_hook.h"

#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <exception>
#include <utility>
#include <vector>

#include "c_api/byteps_c.h"
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

PushPullCommHook::PushPullCommHook(std::string name_prefix, std::optional<at::ScalarType> wire_dtype,
                                   std::string compression_spec)
    : name_prefix_(std::move(name_prefix)), wire_dtype_(wire_dtype), compression_spec_(std::move(compression_spec)) {
  if (wire_dtype_) EngineDtype(*wire_dtype_, "DDP push_pull hook");
  TORCH_CHECK(!(wire_dtype_ && !compression_spec_.empty()), "register_push_pull_hook: a bucket is either cast "
              "for the wire (fp16/bf16) or compressed by the engine ('", compression_spec_, "'), not both");
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
  std::string name = BucketName(name_prefix_, bucket.getIndex(), buffer, wire_dtype_);
  if (!compression_spec_.empty()) {
    // Declared before every push, as the Python hook does: DDP's bucket
    // names change once (the rebuild after the first step), and an engine
    // started again (shutdown, init) begins with no declarations. A hash map
    // write under a lock, nothing next to the push itself.
    // The bucket's parameters, in buffer order: onebit keeps a scale per
    // parameter (one scale across layers starves the small ones).
    std::vector<std::pair<int64_t, uint64_t>> parts;  // (offset, size)
    for (const at::Tensor& grad : bucket.getGradients()) {
      const auto bytes = static_cast<const char*>(grad.data_ptr()) - static_cast<const char*>(buffer.data_ptr());
      parts.emplace_back(bytes / static_cast<int64_t>(buffer.element_size()), static_cast<uint64_t>(grad.numel()));
    }
    std::sort(parts.begin(), parts.end());
    std::vector<uint64_t> sizes;
    int64_t end = 0;
    for (const auto& part : parts) {
      if (part.first != end) {  // not back to back: no segments (one scale per slice)
        sizes.clear();
        break;
      }
      sizes.push_back(part.second);
      end += static_cast<int64_t>(part.second);
    }
    if (end != buffer.numel()) sizes.clear();
    if (bps_declare_compression_segments(name.c_str(), compression_spec_.c_str(), sizes.data(), sizes.size()) !=
        BPS_OK) {
      const char* why = bps_last_error();
      TORCH_CHECK(false, "byteps DDP hook: compression '", compression_spec_, "' for bucket '", name,
                  "': ", (why && *why) ? why : "refused by the engine");
    }
  }
  SubmitPushPull(wire.wire, name,
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
                              std::optional<at::ScalarType> wire_dtype, std::string compression_spec) {
  TORCH_CHECK(reducer, "register_push_pull_hook: the model has no DDP reducer; pass a "
              "torch.nn.parallel.DistributedDataParallel model");
  reducer->register_comm_hook(
      std::make_unique<PushPullCommHook>(std::move(name_prefix), wire_dtype, std::move(compression_spec)));
}

}  // namespace byteps_torch
