// How a torch tensor crosses the engine boundary: dtype mapping, the
// contiguous CPU "wire" buffer the engine reads and writes in place, and the
// copy back into the caller's tensor when the two differ.
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "c_api/byteps_c.h"

namespace byteps_torch {

// The engine's dtype for `type`, or a c10::Error naming the dtype, the
// operation and the dtypes that are accepted.
bps_dtype EngineDtype(at::ScalarType type, const char* operation);

// Short stable spelling used inside tensor names ("f32", "bf16", ...).
const char* DtypeTag(at::ScalarType type);

// A tensor as the engine sees it. `wire` is contiguous memory (CPU or CUDA)
// in an engine dtype; when it is not `user` itself, CopyBack() moves the result
// into `user` after the engine is done.
struct WireTensor {
  at::Tensor user;
  at::Tensor wire;

  // Arithmetic reductions: `user` must have an engine dtype (or
  // `wire_dtype`, when given, is used for the wire: compression).
  static WireTensor ForReduction(const at::Tensor& user, const char* operation,
                                 c10::optional<at::ScalarType> wire_dtype = c10::nullopt);
  // Pure data movement (broadcast, allgather): any dtype travels as bytes,
  // because each element has exactly one non-zero contributor and a byte
  // sum with zeros is exact.
  static WireTensor ForDataMovement(const at::Tensor& user, const char* operation);

  // Moves the engine's result into `user`; a no-op when `wire` shares
  // `user`'s memory and layout. A CUDA copy is queued on the current stream
  // and not waited for: complete a CUDA-aware Future on that stream after it.
  void CopyBack();

  bool needs_copy_back = false;
};

// Rejects tensors the engine cannot take (sparse, or on a device other than
// CPU and CUDA), naming the operation and the fix. Whether CUDA memory is
// accepted is the engine's call: a CPU-only build refuses it with a message.
void CheckDense(const at::Tensor& tensor, const char* operation);

}  // namespace byteps_torch
