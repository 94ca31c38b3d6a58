// Python face of the torch adapter (module byteps_native.torch._c10d). Thin:
// argument conversion and GIL handling only; the work happens in the other
// files of this folder.
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/version.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "c_api/byteps_c.h"
#include "torch/backend.h"
#include "torch/callback_pool.h"
#include "torch/ddp_comm_hook.h"
#include "torch/engine_init.h"
#include "torch/push_pull.h"
#include "torch/python_future.h"
#include "torch/tensor_wire.h"

namespace py = pybind11;

namespace byteps_torch {
namespace {

c10::intrusive_ptr<c10d::Backend> CreateBackend(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, const std::string& group_name,
    const std::vector<int64_t>& global_ranks, int world_size,
    const c10::intrusive_ptr<c10d::Backend>& cpu_delegate,
    const std::optional<c10::intrusive_ptr<c10d::Backend>>& cuda_delegate) {
  // The engine is one per process, over every rank: a group of all ranks
  // uses it; a group of some ranks sends all its traffic to its delegate.
  bool is_world = size == world_size;
  for (size_t i = 0; i < global_ranks.size(); ++i) {
    is_world = is_world && global_ranks[i] == static_cast<int64_t>(i);
  }
  bool started_here = false;
  if (is_world) {
    started_here = !bps_initialized();
    InitEngineWithStore(store, TopologyFromTorchrunEnv(rank, size));
  }
  return c10::make_intrusive<BytepsBackend>(rank, size, group_name, started_here, is_world,
                                            cpu_delegate,
                                            cuda_delegate.value_or(nullptr));
}

// (name, priority) of the latest engine calls of a 'byteps' backend.
std::vector<std::pair<std::string, int32_t>> RecentEngineCalls(
    const c10::intrusive_ptr<c10d::Backend>& backend) {
  auto* byteps = dynamic_cast<BytepsBackend*>(backend.get());
  TORCH_CHECK(byteps != nullptr, "recent_engine_calls needs a 'byteps' backend, got '",
              backend->getBackendName(), "'");
  std::vector<std::pair<std::string, int32_t>> out;
  for (const auto& call : byteps->RecentEngineCalls()) out.emplace_back(call.name, call.priority);
  return out;
}

// A Future whose value is `result` once `submit`'s engine call succeeded and
// `on_success` (a copy back) ran.
std::shared_ptr<torch::jit::PythonFutureWrapper> WithFuture(
    const at::Tensor& result, const std::function<void(PushPullDone)>& submit, std::function<void()> on_success) {
  std::vector<c10::Device> devices;
  if (result.is_cuda()) devices.push_back(result.device());
  auto future = MakePythonFuture(std::move(devices));
  submit([future, result, on_success = std::move(on_success)](std::exception_ptr error) mutable {
    if (!error) {
      try {
        on_success();
        CompleteWithTensor(future, result);
        return;
      } catch (...) {
        error = std::current_exception();
      }
    }
    future->setErrorIfNeeded(error);
  });
  return std::make_shared<torch::jit::PythonFutureWrapper>(future);
}

// A direct (non-c10d) push_pull whose Future's value is the caller's tensor.
std::shared_ptr<torch::jit::PythonFutureWrapper> SubmitWithFuture(WireTensor wire,
                                                                  const std::string& name,
                                                                  int32_t priority,
                                                                  bps_reduce_op reduce_op) {
  return WithFuture(
      wire.user,
      [&](PushPullDone done) {
        SubmitPushPull(wire.wire, name, priority, reduce_op, wire.user.sizes(), std::move(done));
      },
      [wire]() mutable { wire.CopyBack(); });
}

// The engine's gather (csrc/core/placed_sum.h): a Future of `total_bytes`
// uint8 holding every rank's bytes, this rank's `data` at `offset`.
std::shared_ptr<torch::jit::PythonFutureWrapper> GatherBytesAsync(const at::Tensor& data, int64_t offset,
                                                                  int64_t total_bytes, const std::string& name) {
  TORCH_CHECK(data.dim() == 1 && data.scalar_type() == at::kByte, "gather of '", name,
              "' takes a 1-D uint8 tensor, not ", data.scalar_type(), " of shape ", data.sizes());
  TORCH_CHECK(total_bytes >= 0, "gather of '", name, "': negative total_bytes ", total_bytes);
  at::NoGradGuard no_grad;
  at::Tensor input = data.contiguous();
  at::Tensor output = at::empty({total_bytes}, input.options());
  return WithFuture(
      output, [&](PushPullDone done) { SubmitGatherBytes(input, offset, output, name, 0, std::move(done)); },
      [] {});
}

std::shared_ptr<torch::jit::PythonFutureWrapper> PushPullAsync(
    const at::Tensor& tensor, const std::string& name, int32_t priority, bool average,
    c10::optional<at::ScalarType> wire_dtype) {
  at::NoGradGuard no_grad;  // staging copies are data movement, not autograd
  WireTensor wire = WireTensor::ForReduction(tensor, "push_pull", wire_dtype);
  return SubmitWithFuture(std::move(wire), name, priority,
                          average ? BPS_REDUCE_AVERAGE : BPS_REDUCE_SUM);
}

// Many in-place push_pulls of host tensors in one engine call, fused by the
// engine (csrc/core/fused_group.h): one Future per tensor, whose value is it.
std::vector<std::shared_ptr<torch::jit::PythonFutureWrapper>> PushPullGroupAsync(
    const std::vector<at::Tensor>& tensors, const std::vector<std::string>& names,
    const std::vector<int32_t>& priorities, bool average, const std::vector<c10::optional<at::ScalarType>>& wire_dtypes,
    int64_t fusion_bytes) {
  TORCH_CHECK(names.size() == tensors.size() && priorities.size() == tensors.size() &&
                  wire_dtypes.size() == tensors.size(),
              "push_pull_group_async: ", tensors.size(), " tensors but ", names.size(), " names, ", priorities.size(),
              " priorities and ", wire_dtypes.size(), " wire dtypes");
  at::NoGradGuard no_grad;
  std::vector<GroupedPushPull> members;
  std::vector<std::shared_ptr<torch::jit::PythonFutureWrapper>> futures;
  for (size_t i = 0; i < tensors.size(); ++i) {
    WireTensor wire = WireTensor::ForReduction(tensors[i], "push_pull", wire_dtypes[i]);
    TORCH_CHECK(wire.wire.is_cpu(), "push_pull_group_async takes host tensors; '", names[i], "' is on ",
                wire.wire.device(), " (submit device tensors with push_pull_async)");
    auto future = MakePythonFuture({});
    GroupedPushPull m;
    m.wire = wire.wire;
    m.name = names[i];
    m.priority = priorities[i];
    m.shape = wire.user.sizes().vec();
    m.done = [future, wire](std::exception_ptr error) mutable {
      if (!error) {
        try {
          wire.CopyBack();
          CompleteWithTensor(future, wire.user);
          return;
        } catch (...) {
          error = std::current_exception();
        }
      }
      future->setErrorIfNeeded(error);
    };
    members.push_back(std::move(m));
    futures.push_back(std::make_shared<torch::jit::PythonFutureWrapper>(future));
  }
  SubmitPushPullGroup(std::move(members), average ? BPS_REDUCE_AVERAGE : BPS_REDUCE_SUM, fusion_bytes);
  return futures;
}

std::shared_ptr<torch::jit::PythonFutureWrapper> BroadcastAsync(const at::Tensor& tensor,
                                                                int root_rank,
                                                                const std::string& name,
                                                                int32_t priority) {
  TORCH_CHECK(bps_initialized(), "byteps is not initialized: call byteps_native.torch.init() "
              "before broadcasting '", name, "'");
  TORCH_CHECK(root_rank >= 0 && root_rank < bps_size(), "broadcast of '", name, "': root rank ",
              root_rank, " is outside 0..", bps_size() - 1);
  at::NoGradGuard no_grad;
  WireTensor wire = WireTensor::ForDataMovement(tensor, "broadcast");
  if (root_rank != bps_rank()) {
    wire.wire = at::zeros_like(wire.wire);
    wire.needs_copy_back = true;
  }
  return SubmitWithFuture(std::move(wire), name, priority, BPS_REDUCE_SUM);
}

}  // namespace
}  // namespace byteps_torch

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using namespace byteps_torch;
  m.doc() = "byteps-native torch adapter: the 'byteps' c10d backend and direct push_pull";
  m.attr("built_with_torch_version") = TORCH_VERSION;
  m.attr("c_api_version") = BPS_C_API_VERSION;

  m.def("create_backend", &CreateBackend, py::arg("store"), py::arg("rank"), py::arg("size"),
        py::arg("group_name"), py::arg("global_ranks"), py::arg("world_size"),
        py::arg("cpu_delegate"), py::arg("cuda_delegate") = py::none(),
        py::call_guard<py::gil_scoped_release>(),
        "Return the backend of one group; a group of all ranks starts the engine through the "
        "c10d store (first call). The delegates serve what the engine does not.");
  m.def("recent_engine_calls", &RecentEngineCalls, py::arg("backend"),
        "(engine name, priority) of the latest engine calls of a 'byteps' backend, oldest first.");
  m.def("callback_threads", [] { return CallbackPool::Instance().threads(); },
        "Threads of the pool that completes byteps Futures (diagnostics).");
  m.def("init_with_store",
        [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size) {
          InitEngineWithStore(store, TopologyFromTorchrunEnv(rank, size));
        },
        py::arg("store"), py::arg("rank"), py::arg("size"),
        py::call_guard<py::gil_scoped_release>());
  m.def("init_from_env", &InitEngineFromEnv, py::call_guard<py::gil_scoped_release>(),
        "bps_init(NULL): topology and rendezvous from DMLC_*/BYTEPS_* (bpslaunch).");

  m.def("push_pull_async", &PushPullAsync, py::arg("tensor"), py::arg("name"),
        py::arg("priority") = 0, py::arg("average") = true, py::arg("wire_dtype") = py::none(),
        py::call_guard<py::gil_scoped_release>(),
        "In-place sum/average of `tensor` across ranks; returns a torch Future whose value is "
        "`tensor`. `wire_dtype` (e.g. torch.float16) compresses on the wire.");
  m.def("push_pull_group_async", &PushPullGroupAsync, py::arg("tensors"), py::arg("names"), py::arg("priorities"),
        py::arg("average"), py::arg("wire_dtypes"), py::arg("fusion_bytes") = -1,
        py::call_guard<py::gil_scoped_release>(),
        "In-place sum/average of each host tensor across ranks in one engine call, fused into buckets of at "
        "most `fusion_bytes` (-1: BYTEPS_FUSION_BYTES); returns one torch Future per tensor.");
  m.def("broadcast_async", &BroadcastAsync, py::arg("tensor"), py::arg("root_rank"),
        py::arg("name"), py::arg("priority") = 0, py::call_guard<py::gil_scoped_release>(),
        "In-place broadcast of `tensor` from `root_rank`; returns a torch Future.");
  m.def("register_push_pull_hook", &RegisterPushPullCommHook, py::arg("reducer"),
        py::arg("name_prefix") = "", py::arg("wire_dtype") = py::none(), py::arg("compression_spec") = "",
        "Install the C++ DDP communication hook (push_pull of each bucket, priority = bucket "
        "index) on a DistributedDataParallel model's reducer. `compression_spec` (\"onebit\", "
        "\"topk:ratio=0.01\", ...) names an engine compressor for float32 buckets.");
  m.def("gather_bytes_async", &GatherBytesAsync, py::arg("data"), py::arg("offset"), py::arg("total_bytes"),
        py::arg("name"), py::call_guard<py::gil_scoped_release>(),
        "The engine's gather: a torch Future of a uint8 tensor of `total_bytes`, zeros but for every "
        "rank's bytes at its offset (this rank's `data` at `offset`).");
}
