// The DDP communication hook in C++: a c10d::CommHookInterface registered on
// DDP's Reducer, so each gradient bucket goes to the engine without entering
// the Python interpreter (the Python push_pull_hook takes the GIL, builds a
// name string and a Python Future per bucket: ~20 buckets per ResNet-50 step).
#pragma once

#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include <memory>
#include <optional>
#include <string>

namespace byteps_torch {

class PushPullCommHook final : public c10d::CommHookInterface {
 public:
  // `name_prefix` keeps two DDP models of one process apart; `wire_dtype`
  // (float16 / bfloat16) casts the bucket for the wire; `compression_spec`
  // ("onebit", "topk:ratio=0.01", ...; empty: none) names one of the
  // engine's compressors, which the servers run (docs/compression.md). At
  // most one of the two is given.
  PushPullCommHook(std::string name_prefix, std::optional<at::ScalarType> wire_dtype,
                   std::string compression_spec);

  // Averages the bucket across ranks, in place; priority = bucket index (the
  // highest index holds the first layers, which the next forward needs first).
  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override;
  at::Tensor parseHookResult(const c10::IValue& result) override;

 private:
  std::string name_prefix_;
  std::optional<at::ScalarType> wire_dtype_;
  std::string compression_spec_;
};

// The engine-side name of a bucket: identical to the Python hook's
// (byteps_native/torch/ddp_hooks.py), so ranks agree whichever hook they use.
std::string BucketName(const std::string& prefix, size_t index, const at::Tensor& buffer,
                       std::optional<at::ScalarType> wire_dtype);

// Installs the hook on `reducer` (DistributedDataParallel.reducer). DDP allows
// one hook per model: a second registration fails with the Reducer's error.
void RegisterPushPullCommHook(const std::shared_ptr<c10d::Reducer>& reducer, std::string name_prefix,
                              std::optional<at::ScalarType> wire_dtype, std::string compression_spec);

}  // namespace byteps_torch
