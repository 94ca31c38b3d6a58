#include "torch/python_future.h"

#include <torch/csrc/utils/pybind.h>

namespace py = pybind11;

namespace byteps_torch {
namespace {

// Like torch's ConcretePyObjectHolder, which an extension cannot link (its
// helpers are hidden symbols), and cheaper: the tensor inside is known, so
// markCompleted() need not ask Python for it.
class TensorPyObjectHolder final : public c10::ivalue::PyObjectHolder {
 public:
  TensorPyObjectHolder(py::object object, at::Tensor tensor)
      : object_(std::move(object)), tensor_(std::move(tensor)) {}

  ~TensorPyObjectHolder() override {
    py::gil_scoped_acquire gil;
    object_.dec_ref();
    object_.ptr() = nullptr;  // already released above
  }

  PyObject* getPyObject() override { return object_.ptr(); }
  c10::InferredType tryToInferType() override { return c10::InferredType(c10::TensorType::get()); }
  c10::IValue toIValue(const c10::TypePtr& type, std::optional<int32_t> N) override {
    return tensor_;
  }
  std::string toStr() override { return "byteps push_pull result tensor"; }
  std::vector<at::Tensor> extractTensors() override { return {tensor_}; }

 private:
  py::object object_;
  at::Tensor tensor_;
};

}  // namespace

c10::intrusive_ptr<c10::ivalue::Future> MakePythonFuture(std::vector<c10::Device> devices) {
  // CUDA-aware for CUDA tensors: completion records events on the current
  // streams and wait()/then() make the consumer's streams wait on them.
  return c10::make_intrusive<c10::ivalue::Future>(c10::PyObjectType::get(), std::move(devices));
}

void CompleteWithTensor(const c10::intrusive_ptr<c10::ivalue::Future>& future,
                        const at::Tensor& tensor) {
  c10::intrusive_ptr<c10::ivalue::PyObjectHolder> holder;
  {
    py::gil_scoped_acquire gil;
    holder = c10::make_intrusive<TensorPyObjectHolder>(py::cast(tensor), tensor);
  }
  future->markCompleted(c10::IValue(std::move(holder)));
}

}  // namespace byteps_torch
