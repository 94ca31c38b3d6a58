// Kernels of BytepsPushPull: hand the input tensors to the engine as one
// group (bps_push_pull_group_async: the engine fuses them, attr
// fusion_bytes) without blocking a TensorFlow thread, and finish the op when
// the engine's last completion callback arrives.
//
// Threading: bps_push_pull_async calls back on an engine thread that must not
// block for long, while calling TensorFlow's `done` may run downstream kernels
// inline. So `done` always moves onto the device's CPU worker pool.
//
// Deadlines (attr timeout_seconds, CommunicationOptions.timeout_seconds) are
// the engine's (bps_push_pull_async_with_deadline): a passed deadline fails
// the engine op on every process, and its callback reports it like any other
// failure.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "c_api/byteps_c.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tf/engine_bridge.h"

namespace byteps_native {
namespace tf_adapter {

using ::tensorflow::AsyncOpKernel;
using ::tensorflow::OpInputList;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;

namespace {

// Everything one op execution needs until its last engine callback. Keeps
// itself alive (self_) until then; TensorFlow's `done` runs exactly once,
// after the engine's last callback.
class PendingPushPull : public std::enable_shared_from_this<PendingPushPull> {
 public:
  struct Slot {
    PendingPushPull* group;
    int index;
  };

  static std::shared_ptr<PendingPushPull> Create(OpKernelContext* ctx,
                                                 AsyncOpKernel::DoneCallback done,
                                                 std::vector<std::string> names,
                                                 double timeout_seconds) {
    std::shared_ptr<PendingPushPull> p(
        new PendingPushPull(ctx, std::move(done), std::move(names)));
    p->timeout_seconds_ = timeout_seconds;
    p->self_ = p;
    return p;
  }

  Slot* slot(int i) { return &slots_[i]; }
  std::vector<int64_t>* shape(int i) { return &shapes_[i]; }
  const std::string& name(int i) const { return names_[i]; }

  // Buffers the engine reads or writes stay allocated until its callback.
  void KeepBuffers(int index, const Tensor& input, const Tensor& output) {
    kept_.push_back(input);
    kept_.push_back(output);
    if (names_[index].find(BPS_JOIN_MARK) != std::string::npos) marked_outputs_.emplace_back(index, output);
  }

  void Fail(const absl::Status& status) {
    std::lock_guard<std::mutex> lock(mu_);
    if (status_.ok()) status_ = status;  // the first failure is the cause
  }

  // One tensor is finished or was never submitted, or the submission guard
  // is dropped. `from_engine`: called on an engine thread.
  void Release(bool from_engine) {
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    std::shared_ptr<PendingPushPull> self = std::move(self_);
    absl::Status status;
    {
      std::lock_guard<std::mutex> lock(mu_);
      status = status_;
    }
    // A gather's first round: fail it when a joined rank marked its row
    // (the engine's rule: bps_joined_ranks_check).
    for (const auto& marked : marked_outputs_) {
      if (status.ok()) status = CheckNoRankJoined(names_[marked.first], marked.second);
    }
    Answer(status, from_engine);
    // `self` drops the last engine-side reference here: the buffers go.
  }

  static void EngineDone(void* user_data, int code, const char* message) {
    Slot* slot = static_cast<Slot*>(user_data);
    PendingPushPull* self = slot->group;
    if (code != BPS_OK) {
      self->Fail(FromEngineStatus(code, self->names_[slot->index], message, self->timeout_seconds_));
    }
    self->Release(/*from_engine=*/true);
  }

 private:
  PendingPushPull(OpKernelContext* ctx, AsyncOpKernel::DoneCallback done,
                  std::vector<std::string> names)
      : ctx_(ctx),
        done_(std::move(done)),
        names_(std::move(names)),
        // +1: a guard held by the submitting thread, so the op cannot finish
        // while tensors are still being submitted.
        remaining_(static_cast<int>(names_.size()) + 1),
        slots_(names_.size()),
        shapes_(names_.size()) {
    const auto* threads = ctx->device()->tensorflow_cpu_worker_threads();
    pool_ = threads ? threads->workers : nullptr;
    for (size_t i = 0; i < names_.size(); ++i) {
      slots_[i] = Slot{this, static_cast<int>(i)};
    }
  }

  // Runs TensorFlow's continuation once. Off engine threads: it may run
  // downstream kernels inline.
  void Answer(absl::Status status, bool off_thread) {
    auto finish = [self = shared_from_this(), status] {
      if (!status.ok()) self->ctx_->SetStatus(status);
      AsyncOpKernel::DoneCallback done = std::move(self->done_);
      done();  // ctx_ is invalid from here on
    };
    if (off_thread && pool_ != nullptr) {
      pool_->Schedule(std::move(finish));
    } else {
      finish();
    }
  }

  OpKernelContext* ctx_;
  AsyncOpKernel::DoneCallback done_;
  const std::vector<std::string> names_;  // engine names, valid until the engine is done
  tsl::thread::ThreadPool* pool_ = nullptr;
  std::atomic<int> remaining_;
  std::shared_ptr<PendingPushPull> self_;
  std::vector<Slot> slots_;
  std::vector<std::vector<int64_t>> shapes_;  // engine may read until done
  std::vector<Tensor> kept_;
  std::vector<std::pair<int, Tensor>> marked_outputs_;  // outputs of names with BPS_JOIN_MARK
  std::mutex mu_;
  absl::Status status_;
  double timeout_seconds_ = 0;  // for its errors
};

}  // namespace

class BytepsPushPullKernel : public AsyncOpKernel {
 public:
  explicit BytepsPushPullKernel(OpKernelConstruction* c) : AsyncOpKernel(c) {
    ::tensorflow::DataTypeVector dtypes;
    OP_REQUIRES_OK(c, c->GetAttr("T", &dtypes));
    OP_REQUIRES_OK(c, c->GetAttr("tensor_names", &names_));
    OP_REQUIRES_OK(c, c->GetAttr("priorities", &priorities_));
    bool average = false;
    OP_REQUIRES_OK(c, c->GetAttr("average", &average));
    reduce_op_ = average ? BPS_REDUCE_AVERAGE : BPS_REDUCE_SUM;
    OP_REQUIRES_OK(c, c->GetAttr("timeout_seconds", &timeout_seconds_));
    OP_REQUIRES_OK(c, c->GetAttr("fusion_bytes", &fusion_bytes_));
    OP_REQUIRES(c, timeout_seconds_ >= 0,
                ::tensorflow::errors::InvalidArgument(
                    "BytepsPushPull timeout_seconds must be >= 0 (0: none), got ",
                    timeout_seconds_));
    const size_t n = dtypes.size();
    OP_REQUIRES(c, names_.size() == n,
                ::tensorflow::errors::InvalidArgument(
                    "BytepsPushPull got ", n, " tensors but ", names_.size(),
                    " tensor_names; pass one name per tensor"));
    OP_REQUIRES(c, priorities_.empty() || priorities_.size() == n,
                ::tensorflow::errors::InvalidArgument(
                    "BytepsPushPull got ", n, " tensors but ",
                    priorities_.size(), " priorities; pass none or one each"));
    for (const std::string& name : names_) {
      OP_REQUIRES(c, !name.empty(),
                  ::tensorflow::errors::InvalidArgument(
                      "BytepsPushPull tensor_names must not be empty"));
    }
    engine_dtypes_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      OP_REQUIRES(c, ToEngineDtype(dtypes[i], &engine_dtypes_[i]),
                  ::tensorflow::errors::InvalidArgument(
                      "BytepsPushPull cannot reduce dtype ",
                      ::tensorflow::DataTypeString(dtypes[i]), " of tensor '",
                      names_[i], "'"));
    }
  }

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    OpInputList inputs;
    OP_REQUIRES_OK_ASYNC(ctx, ctx->input_list("tensors", &inputs), done);
    const int n = inputs.size();
    std::vector<std::string> names;
    OP_REQUIRES_OK_ASYNC(ctx, EngineNames(ctx, &names), done);
    std::shared_ptr<PendingPushPull> pending =
        PendingPushPull::Create(ctx, std::move(done), std::move(names), timeout_seconds_);
    std::vector<bps_group_member> members;
    members.reserve(n);
    for (int i = 0; i < n; ++i) {
      const Tensor& input = inputs[i];
      Tensor* output = nullptr;
      // In place when TensorFlow lets us reuse the input buffer; the engine
      // accepts output == input.
      absl::Status st =
          ctx->forward_input_or_allocate_output({i}, i, input.shape(), &output);
      if (!st.ok()) {
        pending->Fail(st);
        pending->Release(/*from_engine=*/false);
        continue;
      }
      if (input.NumElements() == 0) {  // every rank agrees on shape: skip
        pending->Release(/*from_engine=*/false);
        continue;
      }
      pending->KeepBuffers(i, input, *output);
      members.push_back(GroupMemberOf(input, const_cast<char*>(output->tensor_data().data()), engine_dtypes_[i],
                                      EngineDevice(ctx), pending->shape(i), pending->name(i),
                                      priorities_.empty() ? 0 : static_cast<int32_t>(priorities_[i]), reduce_op_,
                                      &PendingPushPull::EngineDone, pending->slot(i)));
    }
    if (!members.empty()) {
      const int code = bps_push_pull_group_async(members.data(), static_cast<int32_t>(members.size()),
                                                 fusion_bytes_, timeout_seconds_, /*cuda_stream=*/nullptr);
      if (code != BPS_OK) {  // nothing accepted: the engine will not call back
        pending->Fail(FromEngineStatus(code, members[0].name, bps_last_error()));  // the first failure is the cause
        for (size_t k = 0; k < members.size(); ++k) pending->Release(/*from_engine=*/false);
      }
    }
    pending->Release(/*from_engine=*/false);  // drop the submission guard
  }

 protected:
  // -1 is host memory. A GPU kernel (engine built with CUDA) overrides this
  // with the CUDA ordinal, registers name_suffixes as HostMemory, and submits
  // through bps_push_pull_async_on_stream with TF's compute stream, so the
  // engine is ordered after the kernels that produced the inputs.
  virtual int32_t EngineDevice(OpKernelContext* ctx) const { return -1; }

 private:
  // The attr names, each extended by its run-time suffix when one is given.
  absl::Status EngineNames(OpKernelContext* ctx,
                           std::vector<std::string>* names) const {
    const Tensor& suffixes = ctx->input(ctx->num_inputs() - 1);
    const int64_t count = suffixes.NumElements();
    if (count != 0 && count != static_cast<int64_t>(names_.size())) {
      return ::tensorflow::errors::InvalidArgument(
          "BytepsPushPull got ", names_.size(), " tensors but ", count,
          " name_suffixes; pass none or one per tensor");
    }
    *names = names_;
    if (count == 0) return absl::OkStatus();
    auto flat = suffixes.flat<::tensorflow::tstring>();
    for (int64_t i = 0; i < count; ++i) {
      if (!flat(i).empty()) {
        (*names)[i] += "@";
        (*names)[i].append(flat(i).data(), flat(i).size());
      }
    }
    return absl::OkStatus();
  }

  std::vector<std::string> names_;
  std::vector<int64_t> priorities_;
  std::vector<int32_t> engine_dtypes_;
  int32_t reduce_op_ = BPS_REDUCE_SUM;
  float timeout_seconds_ = 0;  // the engine's per-op deadline; 0: none (BYTEPS_TIMEOUT still applies)
  int64_t fusion_bytes_ = 0;    // bucket limit of the engine's fusion; 0: each tensor alone
};

REGISTER_KERNEL_BUILDER(Name("BytepsPushPull").Device(::tensorflow::DEVICE_CPU),
                        BytepsPushPullKernel);

}  // namespace tf_adapter
}  // namespace byteps_native
