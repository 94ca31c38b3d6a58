// Kernels of BytepsPushPull: hand every input tensor to the engine without
// blocking a TensorFlow thread, and finish the op when the engine's last
// completion callback arrives.
//
// Threading: bps_push_pull_async calls back on an engine thread that must not
// block for long, while calling TensorFlow's `done` may run downstream kernels
// inline. So the final callback only moves `done` onto the device's CPU worker
// pool.
//
// Cancellation: the engine has no cancel call and owns the buffers until its
// callback, so the op cannot finish early on step cancellation; it finishes
// when the engine reports success or failure (bounded by BYTEPS_TIMEOUT).
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
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

// Everything one op execution needs until its last engine callback. Owned by
// itself: deleted by whoever brings `remaining` to zero.
class PendingPushPull {
 public:
  struct Slot {
    PendingPushPull* group;
    int index;
  };

  PendingPushPull(OpKernelContext* ctx, AsyncOpKernel::DoneCallback done,
                  std::vector<std::string> names)
      : ctx_(ctx),
        done_(std::move(done)),
        names_(std::move(names)),
        // +1: a guard held by the submitting thread, so the op cannot finish
        // (and free this object) while tensors are still being submitted.
        remaining_(static_cast<int>(names_.size()) + 1),
        slots_(names_.size()),
        shapes_(names_.size()) {
    const auto* threads = ctx->device()->tensorflow_cpu_worker_threads();
    pool_ = threads ? threads->workers : nullptr;
    for (size_t i = 0; i < names_.size(); ++i) {
      slots_[i] = Slot{this, static_cast<int>(i)};
    }
  }

  Slot* slot(int i) { return &slots_[i]; }
  std::vector<int64_t>* shape(int i) { return &shapes_[i]; }

  void Fail(const absl::Status& status) {
    std::lock_guard<std::mutex> lock(mu_);
    if (status_.ok()) status_ = status;  // the first failure is the cause
  }

  // One tensor is finished (or never submitted). `from_engine`: called on an
  // engine thread, so TensorFlow's continuation must go to TF's own pool.
  void Release(bool from_engine) {
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    if (from_engine && pool_ != nullptr) {
      pool_->Schedule([this] { Finish(); });
    } else {
      Finish();
    }
  }

  static void EngineDone(void* user_data, int code, const char* message) {
    Slot* slot = static_cast<Slot*>(user_data);
    PendingPushPull* self = slot->group;
    if (code != BPS_OK) {
      self->Fail(FromEngineStatus(code, self->names_[slot->index], message));
    }
    self->Release(/*from_engine=*/true);
  }

  const std::string& name(int i) const { return names_[i]; }

 private:
  void Finish() {
    if (!status_.ok()) ctx_->SetStatus(status_);
    AsyncOpKernel::DoneCallback done = std::move(done_);
    delete this;
    done();
  }

  OpKernelContext* ctx_;
  AsyncOpKernel::DoneCallback done_;
  const std::vector<std::string> names_;  // engine names, valid until done
  tsl::thread::ThreadPool* pool_ = nullptr;
  std::atomic<int> remaining_;
  std::vector<Slot> slots_;
  std::vector<std::vector<int64_t>> shapes_;  // engine may read until done
  std::mutex mu_;
  absl::Status status_;
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
    auto* pending = new PendingPushPull(ctx, std::move(done), std::move(names));
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
      std::vector<int64_t>* dims = pending->shape(i);
      for (int d = 0; d < input.dims(); ++d) dims->push_back(input.dim_size(d));
      bps_tensor engine_input;
      engine_input.data = const_cast<char*>(input.tensor_data().data());
      engine_input.num_elements = input.NumElements();
      engine_input.dtype = engine_dtypes_[i];
      engine_input.device = EngineDevice(ctx);
      engine_input.ndim = static_cast<int32_t>(dims->size());
      engine_input.shape = dims->empty() ? nullptr : dims->data();
      const int32_t priority =
          priorities_.empty() ? 0 : static_cast<int32_t>(priorities_[i]);
      const int code = bps_push_pull_async(
          &engine_input, const_cast<char*>(output->tensor_data().data()),
          pending->name(i).c_str(), priority, reduce_op_,
          &PendingPushPull::EngineDone, pending->slot(i));
      if (code != BPS_OK) {  // not accepted: the engine will not call back
        pending->Fail(FromEngineStatus(code, pending->name(i), bps_last_error()));
        pending->Release(/*from_engine=*/false);
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
};

REGISTER_KERNEL_BUILDER(Name("BytepsPushPull").Device(::tensorflow::DEVICE_CPU),
                        BytepsPushPullKernel);

}  // namespace tf_adapter
}  // namespace byteps_native
