// byteps_native.core._core: pybind11 over the C ABI only (never over engine
// internals), so it stays as thin as the torch and TF adapters.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "c_api/byteps_c.h"

namespace py = pybind11;

namespace {

// Raised as byteps_native.core.BytePSError (registered below).
PyObject* g_error_type = nullptr;

[[noreturn]] void Raise(int code, const std::string& message) {
  py::gil_scoped_acquire gil;
  // str(e) is the engine's message; e.code the bps_status_code.
  py::object exc = py::reinterpret_borrow<py::object>(g_error_type)(message);
  exc.attr("code") = code;
  PyErr_SetObject(g_error_type, exc.ptr());
  throw py::error_already_set();
}

void Check(int rc) {
  if (rc != BPS_OK) Raise(rc, bps_last_error());
}

// A pending operation: completed from the engine thread, waited on from Python.
class Handle {
 public:
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  int code = 0;
  std::string message;
  py::object keepalive;  // the arrays, alive until the op completes
  std::vector<int64_t> shape;
  uint64_t op_id = 0;    // for cancel()

  // The last reference may be dropped on an engine thread (an op nobody
  // waited for): Python objects are released under the GIL.
  ~Handle() {
    if (keepalive && Py_IsInitialized()) {
      py::gil_scoped_acquire gil;
      keepalive = py::object();
    } else {
      keepalive.release();
    }
  }

  static void OnDone(void* user, int code, const char* message) {
    auto* h = static_cast<Handle*>(user);
    {
      std::lock_guard<std::mutex> lock(h->mu);
      h->done = true;
      h->code = code;
      h->message = message ? message : "";
    }
    h->cv.notify_all();
  }

  bool Poll() {
    std::lock_guard<std::mutex> lock(mu);
    return done;
  }

  // Asks the engine to fail the op (on every rank still waiting in its
  // round); wait() then raises with code BPS_CANCELLED, or returns if the op
  // completed first.
  void Cancel(const std::string& why) { Check(bps_cancel(op_id, why.c_str())); }

  // The engine guarantees completion (success, error or BYTEPS_TIMEOUT), so
  // an unbounded wait cannot hang.
  void Wait() {
    {
      py::gil_scoped_release release;
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return done; });
    }
    if (code != BPS_OK) Raise(code, message);
  }
};

// The engine's one callback for a Handle: it owns a reference to the Handle
// until then, so the Handle outlives Python dropping it.
void OnHandleDone(void* user, int code, const char* msg) {
  auto* owner = static_cast<std::shared_ptr<Handle>*>(user);
  Handle::OnDone(owner->get(), code, msg);
  delete owner;
}

// Runs `submit(owner)`; if the engine refuses (no callback will come), takes
// the reference back and raises the engine's error.
template <typename SubmitFn>
void SubmitOwned(const std::shared_ptr<Handle>& h, SubmitFn&& submit) {
  auto* owner = new std::shared_ptr<Handle>(h);
  int rc = submit(owner);
  if (rc != BPS_OK) {
    delete owner;
    Check(rc);
  }
}

// Maps a buffer-protocol format to an engine dtype.
int DtypeOf(const py::buffer_info& info) {
  const std::string& f = info.format;
  char c = f.empty() ? '?' : f.back();
  if (info.itemsize == 4 && c == 'f') return BPS_FLOAT32;
  if (info.itemsize == 8 && c == 'd') return BPS_FLOAT64;
  if (info.itemsize == 2 && c == 'e') return BPS_FLOAT16;
  if (info.itemsize == 4 && (c == 'i' || c == 'l')) return BPS_INT32;
  if (info.itemsize == 8 && (c == 'l' || c == 'q')) return BPS_INT64;
  if (info.itemsize == 1 && (c == 'B')) return BPS_UINT8;
  return -1;
}

// Contiguity: the engine reads and writes one flat buffer.
void CheckContiguous(const py::buffer_info& info, const std::string& name) {
  int64_t expect = info.itemsize;
  for (int i = static_cast<int>(info.ndim) - 1; i >= 0; --i) {
    if (info.shape[i] > 1 && info.strides[i] != expect) {
      throw py::value_error("push_pull: array '" + name + "' is not C-contiguous; pass numpy.ascontiguousarray(x)");
    }
    expect *= info.shape[i];
  }
}

std::shared_ptr<Handle> Submit(py::object array, const std::string& name, bool average, int priority,
                               int dtype_override, py::object output, double timeout_seconds) {
  py::buffer buf = py::reinterpret_borrow<py::buffer>(array);
  py::buffer_info info = buf.request(output.is_none());
  void* out_ptr = info.ptr;
  if (!output.is_none()) {
    py::buffer_info out_info = py::reinterpret_borrow<py::buffer>(output).request(true);
    if (out_info.size != info.size || out_info.itemsize != info.itemsize) {
      throw py::value_error("push_pull: output of '" + name + "' must have the input's size and dtype");
    }
    CheckContiguous(out_info, name);
    out_ptr = out_info.ptr;
  }
  int dtype = dtype_override >= 0 ? dtype_override : DtypeOf(info);
  if (dtype < 0) {
    throw py::type_error("push_pull: unsupported dtype '" + info.format +
                         "' (supported: float32, float64, float16, bfloat16, int32, int64, uint8)");
  }
  CheckContiguous(info, name);
  auto h = std::make_shared<Handle>();
  h->keepalive = py::make_tuple(array, output);
  h->shape.assign(info.shape.begin(), info.shape.end());
  bps_tensor t;
  t.data = info.ptr;
  t.num_elements = info.size;
  t.dtype = dtype;
  t.device = -1;
  t.ndim = static_cast<int32_t>(info.ndim);
  t.shape = h->shape.data();
  SubmitOwned(h, [&](void* owner) {
    return bps_push_pull_async_with_deadline(&t, out_ptr, name.c_str(), priority,
                                             average ? BPS_REDUCE_AVERAGE : BPS_REDUCE_SUM, timeout_seconds,
                                             /*cuda_stream=*/nullptr, &OnHandleDone, owner, &h->op_id);
  });
  return h;
}

// Device memory (CuPy and other __cuda_array_interface__ / DLPack producers):
// the Python side extracts pointer, device and stream; the result is ready in
// device memory when the handle completes.
std::shared_ptr<Handle> SubmitDevice(uintptr_t data, uintptr_t output, int64_t num_elements, int dtype, int device,
                                     std::vector<int64_t> shape, const std::string& name, bool average, int priority,
                                     uintptr_t stream, py::object keepalive, double timeout_seconds) {
  auto h = std::make_shared<Handle>();
  h->keepalive = std::move(keepalive);
  h->shape = std::move(shape);
  bps_tensor t;
  t.data = reinterpret_cast<void*>(data);
  t.num_elements = num_elements;
  t.dtype = dtype;
  t.device = device;
  t.ndim = static_cast<int32_t>(h->shape.size());
  t.shape = h->shape.empty() ? nullptr : h->shape.data();
  SubmitOwned(h, [&](void* owner) {
    py::gil_scoped_release release;  // the first GPU call sets up NCCL with the other local ranks
    return bps_push_pull_async_with_deadline(&t, reinterpret_cast<void*>(output), name.c_str(), priority,
                                             average ? BPS_REDUCE_AVERAGE : BPS_REDUCE_SUM, timeout_seconds,
                                             reinterpret_cast<void*>(stream), &OnHandleDone, owner, &h->op_id);
  });
  return h;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "byteps-native's NumPy / DLPack data path over the C ABI (lifecycle, topology and "
            "counters are byteps_native._runtime.library's)";
  // A kind of the runtime's EngineError, so that one except clause catches
  // an engine failure whichever face raised it.
  py::object engine_error = py::module_::import("byteps_native._runtime.errors").attr("EngineError");
  static py::exception<std::runtime_error> error_type(m, "BytePSError", engine_error);
  g_error_type = error_type.ptr();

  py::class_<Handle, std::shared_ptr<Handle>>(m, "Handle")
      .def("poll", &Handle::Poll, "True once the operation completed (successfully or not).")
      .def("wait", &Handle::Wait, "Block until done; raises BytePSError on failure.")
      .def("cancel", &Handle::Cancel, py::arg("why") = "cancelled by the caller",
           "Fail the operation on every rank still waiting in its round (BytePSError, code CANCELLED), "
           "unless it completes first; the name stays usable.");

  m.def("push_pull_async", &Submit, py::arg("array"), py::arg("name"), py::arg("average") = true,
        py::arg("priority") = 0, py::arg("dtype") = -1, py::arg("output") = py::none(),
        py::arg("timeout_seconds") = 0.0);
  m.def("push_pull_device_async", &SubmitDevice, py::arg("data"), py::arg("output"), py::arg("num_elements"),
        py::arg("dtype"), py::arg("device"), py::arg("shape"), py::arg("name"), py::arg("average"),
        py::arg("priority"), py::arg("stream"), py::arg("keepalive"), py::arg("timeout_seconds") = 0.0);
  m.attr("FLOAT32") = static_cast<int>(BPS_FLOAT32);
  m.attr("FLOAT64") = static_cast<int>(BPS_FLOAT64);
  m.attr("FLOAT16") = static_cast<int>(BPS_FLOAT16);
  m.attr("BFLOAT16") = static_cast<int>(BPS_BFLOAT16);
  m.attr("INT32") = static_cast<int>(BPS_INT32);
  m.attr("INT64") = static_cast<int>(BPS_INT64);
  m.attr("UINT8") = static_cast<int>(BPS_UINT8);
  // BytePSError.code values a caller may act on.
  m.attr("MISMATCH") = static_cast<int>(BPS_MISMATCH);
  m.attr("TIMEOUT") = static_cast<int>(BPS_TIMEOUT);
  m.attr("DEADLINE_EXCEEDED") = static_cast<int>(BPS_DEADLINE_EXCEEDED);
  m.attr("CANCELLED") = static_cast<int>(BPS_CANCELLED);
}
