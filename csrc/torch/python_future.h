// Futures handed to Python by the direct push_pull API and DDP hooks.
//
// Their value is a Python object (the result tensor), as for Futures made in
// Python: DDP's Python comm-hook path requires that (python_comm_hook.cpp).
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>

#include <vector>

namespace byteps_torch {

// A Future of element type PyObject; CUDA-aware when `devices` is not empty.
c10::intrusive_ptr<c10::ivalue::Future> MakePythonFuture(std::vector<c10::Device> devices = {});

// Completes `future` with `tensor` wrapped as a Python object. Takes the GIL
// only to wrap; then()-callbacks run without it (they take it if they need it).
void CompleteWithTensor(const c10::intrusive_ptr<c10::ivalue::Future>& future,
                        const at::Tensor& tensor);

}  // namespace byteps_torch
