#include "torch/backend.h"

#include <c10/core/DeviceGuard.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "c_api/byteps_c.h"
#include "torch/push_pull.h"
#include "torch/tensor_wire.h"
#include "torch/work.h"

namespace byteps_torch {

// Engine collectives of one group that have not completed yet: what a
// barrier fences. Shared with the completion callbacks, which may outlive
// the backend.
class InFlightWorks {
 public:
  void Add(const c10::intrusive_ptr<PushPullWork>& work) {
    std::lock_guard<std::mutex> lock(mutex_);
    works_.emplace(work.get(), work);
  }
  void Remove(PushPullWork* work) {
    std::lock_guard<std::mutex> lock(mutex_);
    works_.erase(work);
  }
  std::vector<c10::intrusive_ptr<PushPullWork>> Snapshot() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<c10::intrusive_ptr<PushPullWork>> out;
    for (auto& entry : works_) out.push_back(entry.second);
    return out;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<PushPullWork*, c10::intrusive_ptr<PushPullWork>> works_;
};

namespace {

// Broadcasts below this go to the delegate: the engine's broadcast moves
// the tensor through a sum of zeros, which only pays off for large tensors.
constexpr int64_t kEngineBroadcastMinBytes = 64 * 1024;

bool EngineDtypeOk(at::ScalarType type) {
  switch (type) {
    case at::kFloat: case at::kDouble: case at::kHalf: case at::kBFloat16:
    case at::kInt: case at::kLong: case at::kByte:
      return true;
    default:
      return false;
  }
}

// What gloo moves and reduces (torch hands it complex tensors as real views).
bool GlooDtypeOk(at::ScalarType type) {
  return EngineDtypeOk(type) || type == at::kChar || type == at::kBool;
}

// gloo has no int16 and no wide unsigned types. Data movement needs no
// arithmetic, so contiguous tensors of those dtypes travel as bytes; views
// share memory, so the delegate writes the caller's tensors in place.
std::vector<at::Tensor> AsGlooBytes(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  for (const auto& t : tensors) {
    bool as_bytes = t.defined() && t.layout() == at::kStrided && t.is_cpu() && t.is_contiguous() &&
                    !t.is_complex() && !GlooDtypeOk(t.scalar_type());
    out.push_back(as_bytes ? t.view({-1}).view(at::kByte) : t);
  }
  return out;
}

// gloo has no int16 arithmetic. Reductions on the delegate widen CPU int16
// tensors to int32 and narrow the results back; wrapping arithmetic agrees
// (2^16 divides 2^32) and MIN/MAX/bitwise ops commute with sign extension.
bool IsCpuInt16(const at::Tensor& t) {
  return t.defined() && t.layout() == at::kStrided && t.is_cpu() && t.scalar_type() == at::kShort;
}

bool AnyCpuInt16(const std::vector<at::Tensor>& tensors) {
  return std::any_of(tensors.begin(), tensors.end(), IsCpuInt16);
}

// The int32 stand-ins the delegate reduces, and which of them to narrow
// back into the caller's tensors once it is done.
struct Widened {
  std::vector<at::Tensor> tensors;
  std::vector<std::pair<at::Tensor, at::Tensor>> copy_back;  // (caller's, stand-in)
};

Widened Widen(const std::vector<at::Tensor>& tensors, bool copy_back) {
  Widened into;
  for (const auto& t : tensors) {
    if (!IsCpuInt16(t)) {
      into.tensors.push_back(t);
      continue;
    }
    at::Tensor wide = t.to(at::kInt);
    into.tensors.push_back(wide);
    if (copy_back) into.copy_back.emplace_back(t, wide);
  }
  return into;
}

// A Work that completes when `delegate_work` does, after narrowing its
// int32 results into the caller's int16 tensors.
c10::intrusive_ptr<c10d::Work> NarrowWhenDone(int rank, c10d::OpType op,
                                              const c10::intrusive_ptr<c10d::Work>& delegate_work,
                                              Widened widened, std::vector<at::Tensor> outputs) {
  auto work = c10::make_intrusive<PushPullWork>(rank, op, std::move(outputs));
  auto narrow = [copy_back = std::move(widened.copy_back)]() {
    c10::InferenceMode inference;  // the caller's tensors may be inference tensors
    for (const auto& pair : copy_back) pair.first.copy_(pair.second);
  };
  c10::intrusive_ptr<c10::ivalue::Future> future;
  try {
    future = delegate_work->getFuture();
  } catch (const c10::Error&) {
    // gloo's reduce_scatter works have no Future: wait for it here, as a
    // caller of gloo's own reduce_scatter would.
  }
  if (!future) {
    std::exception_ptr error;
    try {
      delegate_work->wait();
      narrow();
    } catch (...) {
      error = std::current_exception();
    }
    work->Complete(error);
    return work;
  }
  future->addCallback([work, narrow = std::move(narrow)](c10::ivalue::Future& done) {
    std::exception_ptr error;
    if (done.hasError()) {
      error = done.exception_ptr();
    } else {
      try {
        narrow();
      } catch (...) {
        error = std::current_exception();
      }
    }
    work->Complete(error);
  });
  return work;
}

bps_reduce_op EngineReduceOp(const c10d::ReduceOp& op) {
  return op.op_ == c10d::ReduceOp::AVG ? BPS_REDUCE_AVERAGE : BPS_REDUCE_SUM;
}

at::Tensor Bytes(const at::Tensor& contiguous) {
  return contiguous.reshape({-1}).view(at::kByte);
}

int64_t Bytes(const at::Tensor& t, int) { return t.numel() * t.element_size(); }

// The engine places this rank's bytes `input` at byte `offset` of `output`
// and sums it over ranks (csrc/core/placed_sum.h).
EngineSubmission GatherOf(const at::Tensor& input, int64_t offset, const at::Tensor& output) {
  return [input, offset, output](const std::string& name, int32_t priority, PushPullDone done) {
    SubmitGatherBytes(input, offset, output, name, priority, std::move(done));
  };
}

// The engine sums `buffer` (a copy: it is summed in place) and this rank's
// range [offset, offset + kept.numel()) lands in `kept`.
EngineSubmission ReduceScatterOf(const at::Tensor& buffer, int64_t offset, const at::Tensor& kept,
                                 bps_reduce_op reduce_op) {
  return [buffer, offset, kept, reduce_op](const std::string& name, int32_t priority, PushPullDone done) {
    SubmitReduceScatter(buffer, offset, kept, name, priority, reduce_op, std::move(done));
  };
}

// The engine sums `wire` in place.
EngineSubmission PushPullOf(const at::Tensor& wire, bps_reduce_op reduce_op) {
  return [wire, reduce_op](const std::string& name, int32_t priority, PushPullDone done) {
    SubmitPushPull(wire, name, priority, reduce_op, /*shape_for_errors=*/{}, std::move(done));
  };
}

}  // namespace

BytepsBackend::BytepsBackend(int rank, int size, std::string group_name, bool owns_engine,
                             bool use_engine, c10::intrusive_ptr<c10d::Backend> cpu_delegate,
                             c10::intrusive_ptr<c10d::Backend> cuda_delegate)
    : c10d::Backend(rank, size),
      group_name_(std::move(group_name)),
      owns_engine_(owns_engine),
      use_engine_(use_engine),
      engine_takes_cuda_((bps_capabilities() & BPS_CAP_CUDA) != 0),
      cpu_delegate_(std::move(cpu_delegate)),
      cuda_delegate_(std::move(cuda_delegate)),
      in_flight_(std::make_shared<InFlightWorks>()),
      names_(group_name_) {
  TORCH_CHECK(cpu_delegate_, "byteps backend for group '", group_name_, "' needs a CPU delegate");
  init();
}

bool BytepsBackend::EngineTakes(const at::Tensor& tensor, const c10d::ReduceOp* reduce_op,
                                std::optional<at::ScalarType> wire_type) const {
  if (!use_engine_ || coalescing_ || !tensor.defined() || tensor.layout() != at::kStrided ||
      tensor.numel() == 0) {
    return false;
  }
  if (!tensor.is_cpu() && !(tensor.is_cuda() && engine_takes_cuda_)) return false;
  if (reduce_op == nullptr) return true;  // data movement: any dtype travels as bytes
  return (reduce_op->op_ == c10d::ReduceOp::SUM || reduce_op->op_ == c10d::ReduceOp::AVG) &&
         EngineDtypeOk(wire_type.value_or(tensor.scalar_type()));
}

c10d::Backend& BytepsBackend::DelegateFor(c10::DeviceType device) {
  if (device == c10::DeviceType::CUDA) {
    TORCH_CHECK(cuda_delegate_, "byteps group '", group_name_, "' has no CUDA delegate (NCCL is ",
                "not available in this torch build, or CUDA was not available when the group "
                "was created) for an operation the engine does not serve on CUDA tensors; "
                "move the tensors to the CPU");
    if (coalescing_) coalesced_cuda_ = true;
    return *cuda_delegate_;
  }
  return *cpu_delegate_;
}

c10d::Backend& BytepsBackend::DelegateFor(const at::Tensor& tensor) {
  return DelegateFor(tensor.defined() ? tensor.device().type() : c10::DeviceType::CPU);
}

void BytepsBackend::Run(const c10::intrusive_ptr<PushPullWork>& work, const at::Tensor& wire,
                        const char* op, bool later_first, EngineSubmission submit,
                        std::function<void()> on_success) {
  EngineCall call = names_.Next(op, wire, later_first);
  PushPullDone complete = [work, in_flight = in_flight_, device = wire.device(),
                           on_success = std::move(on_success)](std::exception_ptr error) {
    if (!error) {
      try {
        // Copies queued here go on this thread's current stream; the
        // Work's CUDA-aware Future records its events after them.
        c10::DeviceGuard guard(device);
        // The caller's tensors may be inference tensors (made under
        // torch.inference_mode()); the copy back is data movement.
        c10::InferenceMode inference;
        on_success();
      } catch (...) {
        error = std::current_exception();
      }
    }
    in_flight->Remove(work.get());
    work->Complete(error);
  };
  in_flight_->Add(work);
  try {
    submit(call.name, call.priority, std::move(complete));
  } catch (...) {
    in_flight_->Remove(work.get());
    throw;
  }
}

c10::intrusive_ptr<c10d::Work> BytepsBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::AllreduceOptions& opts) {
  Count();
  // int16: the engine reduces it as int32 (see Widen); so does the delegate.
  bool int16 = tensors.size() == 1 && tensors[0].scalar_type() == at::kShort &&
               tensors[0].layout() == at::kStrided;
  std::optional<at::ScalarType> wire_type;
  if (int16) wire_type = at::kInt;
  if (tensors.size() != 1 || !EngineTakes(tensors[0], &opts.reduceOp, wire_type)) {
    if (AnyCpuInt16(tensors)) {
      Widened wide = Widen(tensors, /*copy_back=*/true);
      auto delegate_work = cpu_delegate_->allreduce(wide.tensors, opts);
      return NarrowWhenDone(rank_, c10d::OpType::ALLREDUCE, delegate_work, std::move(wide), tensors);
    }
    return DelegateFor(tensors.empty() ? at::Tensor() : tensors[0]).allreduce(tensors, opts);
  }
  WireTensor wire = WireTensor::ForReduction(tensors[0], "allreduce", wire_type);
  auto work = c10::make_intrusive<PushPullWork>(rank_, c10d::OpType::ALLREDUCE, tensors);
  Run(work, wire.wire, "allreduce", /*later_first=*/true,
      PushPullOf(wire.wire, EngineReduceOp(opts.reduceOp)), [wire]() mutable { wire.CopyBack(); });
  return work;
}

c10::intrusive_ptr<c10d::Work> BytepsBackend::allreduce_sparse(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  Count();
  return DelegateFor(tensors.empty() ? at::Tensor() : tensors[0]).allreduce_sparse(tensors, opts);
}

c10::intrusive_ptr<c10d::Work> BytepsBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  Count();
  bool engine = !tensors.empty();
  for (const auto& t : tensors) {
    engine = engine && EngineTakes(t, &opts.reduceOp) &&
             t.scalar_type() == tensors[0].scalar_type() && t.device() == tensors[0].device();
  }
  if (!engine) {
    if (AnyCpuInt16(tensors)) {
      Widened wide = Widen(tensors, /*copy_back=*/true);
      auto delegate_work = cpu_delegate_->allreduce_coalesced(wide.tensors, opts);
      return NarrowWhenDone(rank_, c10d::OpType::ALLREDUCE_COALESCED, delegate_work,
                            std::move(wide), tensors);
    }
    return DelegateFor(tensors.empty() ? at::Tensor() : tensors[0])
        .allreduce_coalesced(tensors, opts);
  }
  std::vector<at::Tensor> flat_parts;
  for (const auto& t : tensors) flat_parts.push_back(t.reshape({-1}));
  at::Tensor flat = at::cat(flat_parts);  // one buffer, one push_pull
  auto work =
      c10::make_intrusive<PushPullWork>(rank_, c10d::OpType::ALLREDUCE_COALESCED, tensors);
  Run(work, flat, "allreduce_coalesced", /*later_first=*/true,
      PushPullOf(flat, EngineReduceOp(opts.reduceOp)), [tensors, flat]() mutable {
        int64_t offset = 0;
        for (auto& t : tensors) {
          t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
          offset += t.numel();
        }
      });
  return work;
}

c10::intrusive_ptr<c10d::Work> BytepsBackend::reduce(std::vector<at::Tensor>& tensors,
                                                     const c10d::ReduceOptions& opts) {
  Count();
  if (tensors.size() != 1 || !EngineTakes(tensors[0], &opts.reduceOp) || opts.rootRank < 0 ||
      opts.rootRank >= size_) {
    if (AnyCpuInt16(tensors)) {
      Widened wide = Widen(tensors, /*copy_back=*/opts.rootRank == rank_);
      auto delegate_work = cpu_delegate_->reduce(wide.tensors, opts);
      return NarrowWhenDone(rank_, c10d::OpType::REDUCE, delegate_work, std::move(wide), tensors);
    }
    return DelegateFor(tensors.empty() ? at::Tensor() : tensors[0]).reduce(tensors, opts);
  }
  WireTensor wire = WireTensor::ForReduction(tensors[0], "reduce");
  bool is_root = opts.rootRank == rank_;
  // Non-roots reduce a copy: their tensors must come back unchanged.
  at::Tensor buffer = is_root ? wire.wire : wire.wire.clone();
  auto work = c10::make_intrusive<PushPullWork>(rank_, c10d::OpType::REDUCE, tensors);
  Run(work, buffer, "reduce", /*later_first=*/false, PushPullOf(buffer, EngineReduceOp(opts.reduceOp)),
      [wire, is_root]() mutable {
        if (is_root) wire.CopyBack();
      });
  return work;
}

c10::intrusive_ptr<c10d::Work> BytepsBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                        const c10d::BroadcastOptions& opts) {
  Count();
  if (tensors.size() != 1 || !EngineTakes(tensors[0], nullptr) ||
      Bytes(tensors[0], 0) < kEngineBroadcastMinBytes || opts.rootRank < 0 ||
      opts.rootRank >= size_) {
    std::vector<at::Tensor> moved = AsGlooBytes(tensors);
    return DelegateFor(tensors.empty() ? at::Tensor() : tensors[0]).broadcast(moved, opts);
  }
  WireTensor wire = WireTensor::ForDataMovement(tensors[0], "broadcast");
  if (opts.rootRank != rank_) {
    // A separate zero buffer: the caller's tensor is untouched if this fails.
    wire.wire = at::zeros_like(wire.wire);
    wire.needs_copy_back = true;
  }
  auto work = c10::make_intrusive<PushPullWork>(rank_, c10d::OpType::BROADCAST, tensors);
  Run(work, wire.wire, "broadcast", /*later_first=*/false, PushPullOf(wire.wire, BPS_REDUCE_SUM),
      [wire]() mutable { wire.CopyBack(); });
  return work;
}

c10::intrusive_ptr<c10d::Work> BytepsBackend::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  Count();
  bool engine = inputs.size() == 1 && outputs.size() == 1 &&
                static_cast<int>(outputs[0].size()) == size_ && EngineTakes(inputs[0], nullptr);
  for (int i = 0; engine && i < size_; ++i) {
    const at::Tensor& part = outputs[0][i];
    engine = EngineTakes(part, nullptr) && part.scalar_type() == inputs[0].scalar_type() &&
             part.device() == inputs[0].device();
  }
  engine = engine && outputs[0][rank_].numel() == inputs[0].numel();
  if (!engine) {
    std::vector<at::Tensor> moved_inputs = AsGlooBytes(inputs);
    std::vector<std::vector<at::Tensor>> moved_outputs;
    for (const auto& list : outputs) moved_outputs.push_back(AsGlooBytes(list));
    return DelegateFor(inputs.empty() ? at::Tensor() : inputs[0])
        .allgather(moved_outputs, moved_inputs, opts);
  }
  const at::Tensor& input = inputs[0];
  std::vector<at::Tensor> parts = outputs[0];
  int64_t total_bytes = 0, my_offset = 0;
  for (int i = 0; i < size_; ++i) {
    if (i == rank_) my_offset = total_bytes;
    total_bytes += Bytes(parts[i], 0);
  }
  WireTensor in = WireTensor::ForDataMovement(input, "allgather");
  at::Tensor flat = at::empty({total_bytes}, input.options().dtype(at::kByte));
  auto work = c10::make_intrusive<PushPullWork>(rank_, c10d::OpType::ALLGATHER, parts);
  Run(work, flat, "allgather", /*later_first=*/false, GatherOf(in.wire, my_offset, flat),
      [parts, flat]() mutable {
        int64_t offset = 0;
        for (auto& part : parts) {
          int64_t bytes = part.numel() * part.element_size();
          part.copy_(flat.narrow(0, offset, bytes).view(part.scalar_type()).view(part.sizes()));
          offset += bytes;
        }
      });
  return work;
}

c10::intrusive_ptr<c10d::Work> BytepsBackend::_allgather_base(at::Tensor& output,
                                                              at::Tensor& input,
                                                              const c10d::AllgatherOptions& opts) {
  Count();
  if (!EngineTakes(output, nullptr) || !EngineTakes(input, nullptr) ||
      output.scalar_type() != input.scalar_type() || output.device() != input.device() ||
      output.numel() != input.numel() * size_) {
    return DelegateFor(input)._allgather_base(output, input, opts);
  }
  WireTensor out = WireTensor::ForDataMovement(output, "_allgather_base");
  // The input may be this rank's very slot of the output: the engine places it.
  at::Tensor in_bytes = Bytes(input.contiguous());
  auto work = c10::make_intrusive<PushPullWork>(rank_, c10d::OpType::_ALLGATHER_BASE,
                                                std::vector<at::Tensor>{output});
  Run(work, out.wire, "allgather_base", /*later_first=*/false,
      GatherOf(in_bytes, in_bytes.numel() * rank_, out.wire), [out]() mutable { out.CopyBack(); });
  return work;
}

c10::intrusive_ptr<c10d::Work> BytepsBackend::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  Count();
  return DelegateFor(inputs.empty() ? at::Tensor() : inputs[0])
      .allgather_coalesced(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> BytepsBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  Count();
  return DelegateFor(inputs.empty() ? at::Tensor() : inputs[0])
      .allgather_into_tensor_coalesced(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> BytepsBackend::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  Count();
  return DelegateFor(inputs.empty() ? at::Tensor() : inputs[0]).gather(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> BytepsBackend::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  Count();
  return DelegateFor(outputs.empty() ? at::Tensor() : outputs[0]).scatter(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> BytepsBackend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  Count();
  bool engine = outputs.size() == 1 && inputs.size() == 1 &&
                static_cast<int>(inputs[0].size()) == size_ &&
                EngineTakes(outputs[0], &opts.reduceOp);
  for (int i = 0; engine && i < size_; ++i) {
    const at::Tensor& part = inputs[0][i];
    engine = EngineTakes(part, &opts.reduceOp) && part.scalar_type() == outputs[0].scalar_type() &&
             part.device() == outputs[0].device();
  }
  engine = engine && inputs[0][rank_].numel() == outputs[0].numel();
  if (!engine) {
    bool int16 = AnyCpuInt16(outputs);
    for (const auto& list : inputs) int16 = int16 || AnyCpuInt16(list);
    if (int16) {
      Widened wide = Widen(outputs, /*copy_back=*/true);
      std::vector<std::vector<at::Tensor>> wide_inputs;
      for (const auto& list : inputs) wide_inputs.push_back(Widen(list, false).tensors);
      auto delegate_work = cpu_delegate_->reduce_scatter(wide.tensors, wide_inputs, opts);
      return NarrowWhenDone(rank_, c10d::OpType::REDUCE_SCATTER, delegate_work, std::move(wide),
                            outputs);
    }
    return DelegateFor(outputs.empty() ? at::Tensor() : outputs[0])
        .reduce_scatter(outputs, inputs, opts);
  }
  at::Tensor output = outputs[0];
  std::vector<at::Tensor> flat_parts;
  int64_t my_offset = 0, total = 0;
  for (int i = 0; i < size_; ++i) {
    if (i == rank_) my_offset = total;
    total += inputs[0][i].numel();
    flat_parts.push_back(inputs[0][i].reshape({-1}));
  }
  at::Tensor flat = at::cat(flat_parts);
  WireTensor kept = WireTensor::ForReduction(output, "reduce_scatter");
  auto work = c10::make_intrusive<PushPullWork>(rank_, c10d::OpType::REDUCE_SCATTER, outputs);
  Run(work, flat, "reduce_scatter", /*later_first=*/false,
      ReduceScatterOf(flat, my_offset, kept.wire, EngineReduceOp(opts.reduceOp)),
      [kept]() mutable { kept.CopyBack(); });
  return work;
}

c10::intrusive_ptr<c10d::Work> BytepsBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  Count();
  if (!EngineTakes(output, &opts.reduceOp) || !EngineTakes(input, &opts.reduceOp) ||
      output.scalar_type() != input.scalar_type() || output.device() != input.device() ||
      input.numel() != output.numel() * size_) {
    if (IsCpuInt16(output) || IsCpuInt16(input)) {
      Widened wide = Widen({output}, /*copy_back=*/true);
      at::Tensor wide_input = Widen({input}, false).tensors[0];
      auto delegate_work = cpu_delegate_->_reduce_scatter_base(wide.tensors[0], wide_input, opts);
      return NarrowWhenDone(rank_, c10d::OpType::_REDUCE_SCATTER_BASE, delegate_work,
                            std::move(wide), {output});
    }
    return DelegateFor(input)._reduce_scatter_base(output, input, opts);
  }
  // The input must come back unchanged, so the engine sums a copy.
  at::Tensor flat = input.reshape({-1}).clone(at::MemoryFormat::Contiguous);
  WireTensor kept = WireTensor::ForReduction(output, "_reduce_scatter_base");
  auto work = c10::make_intrusive<PushPullWork>(rank_, c10d::OpType::_REDUCE_SCATTER_BASE,
                                                std::vector<at::Tensor>{output});
  Run(work, flat, "reduce_scatter_base", /*later_first=*/false,
      ReduceScatterOf(flat, output.numel() * rank_, kept.wire, EngineReduceOp(opts.reduceOp)),
      [kept]() mutable { kept.CopyBack(); });
  return work;
}

c10::intrusive_ptr<c10d::Work> BytepsBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  Count();
  if (AnyCpuInt16(outputs) || AnyCpuInt16(inputs)) {
    Widened wide = Widen(outputs, /*copy_back=*/true);
    std::vector<at::Tensor> wide_inputs = Widen(inputs, false).tensors;
    auto delegate_work =
        cpu_delegate_->reduce_scatter_tensor_coalesced(wide.tensors, wide_inputs, opts);
    // COALESCED, not REDUCE_SCATTER_TENSOR_COALESCED: torch 2.11 has no such
    // OpType, and the label is all the Work carries of it.
    return NarrowWhenDone(rank_, c10d::OpType::COALESCED, delegate_work,
                          std::move(wide), outputs);
  }
  return DelegateFor(inputs.empty() ? at::Tensor() : inputs[0])
      .reduce_scatter_tensor_coalesced(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> BytepsBackend::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) {
  Count();
  return DelegateFor(input).alltoall_base(output, input, output_split_sizes, input_split_sizes,
                                          opts);
}

c10::intrusive_ptr<c10d::Work> BytepsBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                       std::vector<at::Tensor>& inputs,
                                                       const c10d::AllToAllOptions& opts) {
  Count();
  return DelegateFor(inputs.empty() ? at::Tensor() : inputs[0]).alltoall(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> BytepsBackend::send(std::vector<at::Tensor>& tensors,
                                                   int dst_rank, int tag) {
  // Point-to-point traffic is not a group collective: no sequence number.
  return DelegateFor(tensors.empty() ? at::Tensor() : tensors[0]).send(tensors, dst_rank, tag);
}

c10::intrusive_ptr<c10d::Work> BytepsBackend::recv(std::vector<at::Tensor>& tensors,
                                                    int src_rank, int tag) {
  return DelegateFor(tensors.empty() ? at::Tensor() : tensors[0]).recv(tensors, src_rank, tag);
}

c10::intrusive_ptr<c10d::Work> BytepsBackend::recvAnysource(std::vector<at::Tensor>& tensors,
                                                            int tag) {
  return DelegateFor(tensors.empty() ? at::Tensor() : tensors[0]).recvAnysource(tensors, tag);
}

c10::intrusive_ptr<c10d::Work> BytepsBackend::barrier(const c10d::BarrierOptions& opts) {
  Count();
  // What to wait for is taken before the delegate's barrier is issued:
  // exactly the engine collectives issued before this call.
  std::vector<c10::intrusive_ptr<PushPullWork>> earlier = in_flight_->Snapshot();
  c10d::BarrierOptions cpu_opts = opts;
  cpu_opts.device_ids.clear();  // the CPU delegate's barrier; NCCL orders itself on streams
  c10::intrusive_ptr<c10d::Work> arrived = cpu_delegate_->barrier(cpu_opts);
  auto fence = c10::make_intrusive<PushPullWork>(rank_, c10d::OpType::BARRIER,
                                                 std::vector<at::Tensor>{});
  // One count per earlier collective and one for the delegate's barrier; the
  // last to finish completes the fence. Earlier collectives report their own
  // failures; the fence fails only if the barrier itself does.
  struct Countdown {
    std::atomic<int64_t> left;
    std::exception_ptr error;
  };
  auto countdown = std::make_shared<Countdown>();
  countdown->left = static_cast<int64_t>(earlier.size()) + 1;
  auto arrive = [fence, countdown]() {
    if (countdown->left.fetch_sub(1) == 1) fence->Complete(countdown->error);
  };
  for (const auto& work : earlier) {
    work->OnComplete([arrive](std::exception_ptr) { arrive(); });
  }
  arrived->getFuture()->addCallback([arrive, countdown](c10::ivalue::Future& future) {
    if (future.hasError()) countdown->error = future.exception_ptr();
    arrive();
  });
  return fence;
}

void BytepsBackend::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  // gloo's monitored barrier over the delegate, after this group's engine
  // work, as barrier(). torch.distributed.monitored_barrier() itself only
  // admits groups named 'gloo'; ProcessGroup.monitored_barrier reaches here.
  // Only local waits first: a missing rank must be named by gloo's
  // monitored barrier, not time out in an ordinary one.
  for (const auto& work : in_flight_->Snapshot()) {
    try {
      work->wait();
    } catch (const std::exception&) {
      // That collective reports its own failure to whoever waits on it.
    }
  }
  cpu_delegate_->monitoredBarrier(opts, wait_all_ranks);
}

void BytepsBackend::setSequenceNumberForGroup() {
  // Every rank starts the group at 0 and counts the same collectives in the
  // same order, so the numbers agree without a store round trip (as gloo).
  sequence_number_ = 0;
}

uint64_t BytepsBackend::getSequenceNumberForGroup() { return sequence_number_; }

bool BytepsBackend::supportsCoalescing() const {
  return cpu_delegate_->supportsCoalescing() &&
         (!cuda_delegate_ || cuda_delegate_->supportsCoalescing());
}

void BytepsBackend::startCoalescing() {
  // A coalescing block is one unit of the delegate: every op inside it goes
  // there, so the delegate can issue them together at endCoalescing().
  coalescing_ = true;
  coalesced_cuda_ = false;
  cpu_delegate_->startCoalescing();
  if (cuda_delegate_) cuda_delegate_->startCoalescing();
}

c10::intrusive_ptr<c10d::Work> BytepsBackend::endCoalescing() {
  coalescing_ = false;
  c10::intrusive_ptr<c10d::Work> cpu_work = cpu_delegate_->endCoalescing();
  c10::intrusive_ptr<c10d::Work> cuda_work;
  if (cuda_delegate_) cuda_work = cuda_delegate_->endCoalescing();
  return coalesced_cuda_ ? cuda_work : cpu_work;
}

void BytepsBackend::setTimeout(std::chrono::milliseconds timeout) {
  cpu_delegate_->setTimeout(timeout);
  if (cuda_delegate_) cuda_delegate_->setTimeout(timeout);
}

void BytepsBackend::abort() {
  cpu_delegate_->abort();
  if (cuda_delegate_) cuda_delegate_->abort();
}

void BytepsBackend::shutdown() {
  cpu_delegate_->shutdown();
  if (cuda_delegate_) cuda_delegate_->shutdown();
  // Only the backend that started the engine stops it: other groups and the
  // Horovod-style API share the same engine.
  if (owns_engine_ && bps_initialized()) {
    owns_engine_ = false;
    bps_shutdown();
  }
}

}  // namespace byteps_torch
