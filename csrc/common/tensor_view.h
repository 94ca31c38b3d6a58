// A tensor as the engine receives it: memory it does not own, and how to read it.
#pragma once
#include <cstdint>

namespace bps {

// The caller's memory must stay valid until the operation's completion runs.
// `dtype` is the code the caller gave (a DataType's value), kept unchecked
// here: the submission's validation (core/validation.h) names a bad one.
struct TensorView {
  void* data = nullptr;          // host memory when device < 0
  int64_t num_elements = 0;      // elements, not bytes
  int32_t dtype = 0;             // a DataType's value
  int32_t device = -1;           // -1: host. >= 0: CUDA ordinal (GPU build only)
  int32_t ndim = 0;              // 0 with shape == nullptr: 1-D [num_elements]
  const int64_t* shape = nullptr;  // for mismatch errors; may be null
};

}  // namespace bps
