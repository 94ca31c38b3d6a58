// The 'byteps' c10d backend: every collective is one engine push_pull.
//
// The engine only sums (or averages), so the rest is built on it:
//   broadcast    root contributes the tensor, others zeros, SUM (as bytes)
//   allgather    each rank writes its part at its offset in a zeroed buffer, SUM
//   reduce_scatter  SUM of the full input, then this rank's slice
//   barrier      push_pull of one element
// Names are "c10d.<group>.<op>.<dtype>.<numel>": stable across steps (each
// distinct name costs engine memory for good) and unambiguous because torch
// issues collectives in the same order on every rank and the engine serves
// repeated submissions of one name in order.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <string>

namespace byteps_torch {

class BytepsBackend : public c10d::Backend {
 public:
  // `group_name` is torch's group name, identical on every rank.
  BytepsBackend(int rank, int size, std::string group_name, bool owns_engine);

  const std::string getBackendName() const override { return "byteps"; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
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
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  void shutdown() override;

 private:
  std::string Name(const char* op, const at::Tensor& wire) const;

  std::string group_name_;
  bool owns_engine_;
};

}  // namespace byteps_torch
