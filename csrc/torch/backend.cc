#include "torch/backend.h"

#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <functional>

#include "c_api/byteps_c.h"
#include "torch/push_pull.h"
#include "torch/tensor_wire.h"
#include "torch/work.h"

namespace byteps_torch {
namespace {

const char* ReduceOpName(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

bps_reduce_op EngineReduceOp(const c10d::ReduceOp& op, const char* operation) {
  if (op.op_ == c10d::ReduceOp::SUM) return BPS_REDUCE_SUM;
  if (op.op_ == c10d::ReduceOp::AVG) return BPS_REDUCE_AVERAGE;
  TORCH_CHECK(false, "byteps ", operation, " supports ReduceOp.SUM and ReduceOp.AVG only, got ",
              "ReduceOp.", ReduceOpName(op), ": the parameter-server engine can only add. "
              "Run this collective on a gloo group: dist.new_group(backend='gloo').");
}

at::Tensor& OnlyTensor(std::vector<at::Tensor>& tensors, const char* operation) {
  TORCH_CHECK(tensors.size() == 1, "byteps ", operation, " takes exactly one tensor per call, got ",
              tensors.size(), "; issue one call per tensor or use allreduce_coalesced");
  return tensors[0];
}

at::Tensor Bytes(const at::Tensor& contiguous) {
  return contiguous.reshape({-1}).view(at::kByte);
}

// Submits `wire` and, after the engine is done, runs `on_success` (copies
// into the caller's tensors) and completes `work`.
void Run(const c10::intrusive_ptr<PushPullWork>& work, const at::Tensor& wire,
         const std::string& name, bps_reduce_op reduce_op, std::function<void()> on_success) {
  SubmitPushPull(wire, name, /*priority=*/0, reduce_op, /*shape_for_errors=*/{},
                 [work, device = wire.device(),
                  on_success = std::move(on_success)](std::exception_ptr error) {
                   if (!error) {
                     try {
                       // Copies queued here go on this thread's current stream; the
                       // Work's CUDA-aware Future records its events after them.
                       c10::DeviceGuard guard(device);
                       on_success();
                     } catch (...) {
                       error = std::current_exception();
                     }
                   }
                   work->Complete(error);
                 });
}

}  // namespace

BytepsBackend::BytepsBackend(int rank, int size, std::string group_name, bool owns_engine)
    : c10d::Backend(rank, size), group_name_(std::move(group_name)), owns_engine_(owns_engine) {
  init();
}

std::string BytepsBackend::Name(const char* op, const at::Tensor& wire) const {
  return "c10d." + group_name_ + "." + op + "." + DtypeTag(wire.scalar_type()) + "." +
         std::to_string(wire.numel());
}

c10::intrusive_ptr<c10d::Work> BytepsBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::AllreduceOptions& opts) {
  at::Tensor& tensor = OnlyTensor(tensors, "allreduce");
  bps_reduce_op reduce_op = EngineReduceOp(opts.reduceOp, "allreduce");
  WireTensor wire = WireTensor::ForReduction(tensor, "allreduce");
  auto work = c10::make_intrusive<PushPullWork>(rank_, c10d::OpType::ALLREDUCE, tensors);
  Run(work, wire.wire, Name("allreduce", wire.wire), reduce_op,
      [wire]() mutable { wire.CopyBack(); });
  return work;
}

c10::intrusive_ptr<c10d::Work> BytepsBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "byteps allreduce_coalesced got no tensors");
  bps_reduce_op reduce_op = EngineReduceOp(opts.reduceOp, "allreduce_coalesced");
  std::vector<at::Tensor> flat_parts;
  for (const auto& t : tensors) {
    CheckDense(t, "allreduce_coalesced");
    TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(),
                "byteps allreduce_coalesced needs one dtype for all tensors, got ",
                tensors[0].scalar_type(), " and ", t.scalar_type(), "; group tensors by dtype");
    flat_parts.push_back(t.reshape({-1}));
  }
  EngineDtype(tensors[0].scalar_type(), "allreduce_coalesced");
  at::Tensor flat = at::cat(flat_parts);  // one buffer, one push_pull
  auto work =
      c10::make_intrusive<PushPullWork>(rank_, c10d::OpType::ALLREDUCE_COALESCED, tensors);
  Run(work, flat, Name("allreduce_coalesced", flat), reduce_op, [tensors, flat]() mutable {
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
  at::Tensor& tensor = OnlyTensor(tensors, "reduce");
  bps_reduce_op reduce_op = EngineReduceOp(opts.reduceOp, "reduce");
  WireTensor wire = WireTensor::ForReduction(tensor, "reduce");
  bool is_root = opts.rootRank == rank_;
  // Non-roots reduce a copy: their tensors must come back unchanged.
  at::Tensor buffer = is_root ? wire.wire : wire.wire.clone();
  auto work = c10::make_intrusive<PushPullWork>(rank_, c10d::OpType::REDUCE, tensors);
  Run(work, buffer, Name("reduce", buffer), reduce_op, [wire, is_root]() mutable {
    if (is_root) wire.CopyBack();
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> BytepsBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                        const c10d::BroadcastOptions& opts) {
  at::Tensor& tensor = OnlyTensor(tensors, "broadcast");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, "byteps broadcast: root rank ",
              opts.rootRank, " is outside the group of ", size_);
  WireTensor wire = WireTensor::ForDataMovement(tensor, "broadcast");
  if (opts.rootRank != rank_) {
    // A separate zero buffer: the caller's tensor is untouched if this fails.
    wire.wire = at::zeros_like(wire.wire);
    wire.needs_copy_back = true;
  }
  auto work = c10::make_intrusive<PushPullWork>(rank_, c10d::OpType::BROADCAST, tensors);
  Run(work, wire.wire, Name("broadcast", wire.wire), BPS_REDUCE_SUM,
      [wire]() mutable { wire.CopyBack(); });
  return work;
}

c10::intrusive_ptr<c10d::Work> BytepsBackend::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  at::Tensor& input = OnlyTensor(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
              "byteps allgather needs one output list of ", size_, " tensors");
  std::vector<at::Tensor> parts = outputs[0];
  int64_t total_bytes = 0, my_offset = 0;
  for (int i = 0; i < size_; ++i) {
    CheckDense(parts[i], "allgather");
    TORCH_CHECK(parts[i].scalar_type() == input.scalar_type(), "byteps allgather: output ", i,
                " has dtype ", parts[i].scalar_type(), " but the input has ", input.scalar_type());
    if (i == rank_) my_offset = total_bytes;
    total_bytes += parts[i].numel() * parts[i].element_size();
  }
  TORCH_CHECK(parts[rank_].numel() == input.numel(), "byteps allgather: output ", rank_,
              " has ", parts[rank_].numel(), " elements but this rank's input has ",
              input.numel());
  WireTensor in = WireTensor::ForDataMovement(input, "allgather");
  at::Tensor flat = at::zeros({total_bytes}, input.options().dtype(at::kByte));
  flat.narrow(0, my_offset, in.wire.numel()).copy_(in.wire);
  auto work = c10::make_intrusive<PushPullWork>(rank_, c10d::OpType::ALLGATHER, parts);
  Run(work, flat, Name("allgather", flat), BPS_REDUCE_SUM, [parts, flat]() mutable {
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
  CheckDense(output, "_allgather_base");
  CheckDense(input, "_allgather_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "byteps allgather_into_tensor: output ",
              "dtype ", output.scalar_type(), " differs from input dtype ", input.scalar_type());
  TORCH_CHECK(output.numel() == input.numel() * size_, "byteps allgather_into_tensor: output has ",
              output.numel(), " elements, expected input numel ", input.numel(), " x group size ",
              size_);
  WireTensor out = WireTensor::ForDataMovement(output, "_allgather_base");
  at::Tensor in_bytes = Bytes(input.contiguous());
  int64_t part = in_bytes.numel();
  int64_t offset = part * rank_;
  // Zero everything but this rank's slot; copy the input in last, which is
  // also right when the input is that very slot of the output.
  out.wire.narrow(0, 0, offset).zero_();
  out.wire.narrow(0, offset + part, out.wire.numel() - offset - part).zero_();
  out.wire.narrow(0, offset, part).copy_(in_bytes);
  auto work = c10::make_intrusive<PushPullWork>(rank_, c10d::OpType::_ALLGATHER_BASE,
                                                std::vector<at::Tensor>{output});
  Run(work, out.wire, Name("allgather_base", out.wire), BPS_REDUCE_SUM,
      [out]() mutable { out.CopyBack(); });
  return work;
}

c10::intrusive_ptr<c10d::Work> BytepsBackend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  at::Tensor& output = OnlyTensor(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
              "byteps reduce_scatter needs one input list of ", size_, " tensors");
  bps_reduce_op reduce_op = EngineReduceOp(opts.reduceOp, "reduce_scatter");
  CheckDense(output, "reduce_scatter");
  EngineDtype(output.scalar_type(), "reduce_scatter");
  std::vector<at::Tensor> flat_parts;
  int64_t my_offset = 0, total = 0;
  for (int i = 0; i < size_; ++i) {
    const at::Tensor& part = inputs[0][i];
    CheckDense(part, "reduce_scatter");
    TORCH_CHECK(part.scalar_type() == output.scalar_type(), "byteps reduce_scatter: input ", i,
                " has dtype ", part.scalar_type(), " but the output has ", output.scalar_type());
    if (i == rank_) my_offset = total;
    total += part.numel();
    flat_parts.push_back(part.reshape({-1}));
  }
  TORCH_CHECK(inputs[0][rank_].numel() == output.numel(), "byteps reduce_scatter: input ", rank_,
              " has ", inputs[0][rank_].numel(), " elements but the output has ", output.numel());
  at::Tensor flat = at::cat(flat_parts);
  auto work = c10::make_intrusive<PushPullWork>(rank_, c10d::OpType::REDUCE_SCATTER, outputs);
  Run(work, flat, Name("reduce_scatter", flat), reduce_op, [output, flat, my_offset]() mutable {
    output.copy_(flat.narrow(0, my_offset, output.numel()).view(output.sizes()));
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> BytepsBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  bps_reduce_op reduce_op = EngineReduceOp(opts.reduceOp, "reduce_scatter_tensor");
  CheckDense(output, "reduce_scatter_tensor");
  CheckDense(input, "reduce_scatter_tensor");
  EngineDtype(input.scalar_type(), "reduce_scatter_tensor");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "byteps reduce_scatter_tensor: output ",
              "dtype ", output.scalar_type(), " differs from input dtype ", input.scalar_type());
  TORCH_CHECK(input.numel() == output.numel() * size_, "byteps reduce_scatter_tensor: input has ",
              input.numel(), " elements, expected output numel ", output.numel(),
              " x group size ", size_);
  // The input must come back unchanged, so the engine sums a copy.
  at::Tensor flat = input.reshape({-1}).clone(at::MemoryFormat::Contiguous);
  int64_t offset = output.numel() * rank_;
  auto work = c10::make_intrusive<PushPullWork>(rank_, c10d::OpType::_REDUCE_SCATTER_BASE,
                                                std::vector<at::Tensor>{output});
  Run(work, flat, Name("reduce_scatter_base", flat), reduce_op, [output, flat, offset]() mutable {
    output.copy_(flat.narrow(0, offset, output.numel()).view(output.sizes()));
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> BytepsBackend::barrier(const c10d::BarrierOptions& opts) {
  at::Tensor token = at::zeros({1}, at::kFloat);  // host memory: no device order to respect
  auto work = c10::make_intrusive<PushPullWork>(rank_, c10d::OpType::BARRIER,
                                                std::vector<at::Tensor>{});
  Run(work, token, "c10d." + group_name_ + ".barrier", BPS_REDUCE_SUM, [] {});
  return work;
}

void BytepsBackend::shutdown() {
  // Only the backend that started the engine stops it: other groups and the
  // Horovod-style API share the same engine.
  if (owns_engine_ && bps_initialized()) {
    owns_engine_ = false;
    bps_shutdown();
  }
}

}  // namespace byteps_torch
