// The 'byteps' c10d backend: the parameter-server engine serves the
// collectives data parallelism spends its time on; a gloo (CPU) or NCCL
// (CUDA) backend that this group owns, created over the same store, serves
// everything else, so the whole of torch.distributed works on 'byteps'.
//
// On the engine (one push_pull each; the engine sums or averages):
//   allreduce, allreduce_coalesced, reduce   SUM/AVG of an engine dtype
//   broadcast    root contributes the tensor, others zeros, SUM as bytes
//                (tensors of at least 64 KiB; smaller ones: the delegate)
//   allgather    each rank writes its part at its offset of a zeroed buffer
//   reduce_scatter  SUM of the full input, then this rank's slice
// On the delegate: every other op, reduce op and dtype; sparse tensors;
// ops inside a coalescing block; all traffic of a group that is not all
// ranks (the engine is one per process, over all ranks). docs/torch.md has
// the table.
//
// barrier() is a fence: the delegate's barrier (all ranks arrived, the
// delegate's earlier work done) and every engine collective issued before it
// on this group complete before it does.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "c_api/byteps_c.h"
#include "torch/call_site_names.h"
#include "torch/push_pull.h"

namespace byteps_torch {

class InFlightWorks;

class BytepsBackend : public c10d::Backend {
 public:
  // `group_name` is torch's group name, identical on every rank. `use_engine`:
  // the group spans every rank and the engine runs. `cuda_delegate` may be
  // null (no CUDA, or no NCCL); `cpu_delegate` may not.
  BytepsBackend(int rank, int size, std::string group_name, bool owns_engine, bool use_engine,
                c10::intrusive_ptr<c10d::Backend> cpu_delegate,
                c10::intrusive_ptr<c10d::Backend> cuda_delegate);

  const std::string getBackendName() const override { return "byteps"; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_sparse(std::vector<at::Tensor>& tensors,
                                                  const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;

  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;

  bool supportsCoalescing() const override;
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  void setTimeout(std::chrono::milliseconds timeout) override;
  void abort() override;
  void shutdown() override;

  // Names and priorities of the latest engine calls (diagnostics, tests).
  std::vector<EngineCall> RecentEngineCalls() { return names_.Recent(); }

 private:
  // Whether the engine takes `tensor` (with `reduce_op`, when reducing).
  // `wire_type`: the dtype it would travel in, when not its own.
  bool EngineTakes(const at::Tensor& tensor, const c10d::ReduceOp* reduce_op,
                   std::optional<at::ScalarType> wire_type = std::nullopt) const;
  c10d::Backend& DelegateFor(const at::Tensor& tensor);
  c10d::Backend& DelegateFor(c10::DeviceType device);
  // Names the call after `wire` and submits it; on success runs
  // `on_success` (copies into the caller's tensors), then completes `work`.
  void Run(const c10::intrusive_ptr<class PushPullWork>& work, const at::Tensor& wire,
           const char* op, bool later_first, EngineSubmission submit, std::function<void()> on_success);
  void Count() { ++sequence_number_; }

  std::string group_name_;
  bool owns_engine_;
  bool use_engine_;
  bool engine_takes_cuda_;
  c10::intrusive_ptr<c10d::Backend> cpu_delegate_;
  c10::intrusive_ptr<c10d::Backend> cuda_delegate_;
  std::shared_ptr<InFlightWorks> in_flight_;
  CallSiteNames names_;
  std::atomic<uint64_t> sequence_number_{0};
  bool coalescing_ = false;
  bool coalesced_cuda_ = false;
};

}  // namespace byteps_torch
