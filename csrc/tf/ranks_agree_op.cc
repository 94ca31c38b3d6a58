// BytepsAgreementRow and BytepsCheckRanksAgree: TF's face of the engine's
// rank-agreement check (csrc/core/rank_agreement.h, through the C ABI), the
// one torch uses too: the first builds this rank's row from the tensor's
// run-time shape, the second fails with FailedPrecondition, on every rank,
// when the summed rows differ.
//
// Why ops: in a graph the shape is known only when the graph runs, and as a
// real op the check raises the error class Horovod raises
// (FailedPreconditionError), eagerly and in graphs alike, where a
// tf.py_function would wrap it as UnknownError.
#include <string>
#include <vector>

#include "c_api/byteps_c.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/types.h"

namespace byteps_native {
namespace tf_adapter {

using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;

REGISTER_OP("BytepsAgreementRow")
    .Input("shape: int64")  // the tensor's run-time shape
    .Output("row: int64")   // [BPS_AGREEMENT_SLOTS]
    .Attr("kind: string")
    .Attr("dtype: string")  // TF's Python name of the dtype ("float32")
    .Attr("any_first_dim: bool = false")
    .Attr("extra: int = 0")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->Vector(BPS_AGREEMENT_SLOTS));
      return absl::OkStatus();
    })
    .Doc(R"doc(
This rank's row of a rank-agreement table (the engine's layout and hash).
)doc");

class AgreementRowKernel : public OpKernel {
 public:
  explicit AgreementRowKernel(OpKernelConstruction* c) : OpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("kind", &kind_));
    OP_REQUIRES_OK(c, c->GetAttr("dtype", &dtype_));
    OP_REQUIRES_OK(c, c->GetAttr("any_first_dim", &any_first_dim_));
    OP_REQUIRES_OK(c, c->GetAttr("extra", &extra_));
  }

  void Compute(OpKernelContext* ctx) override {
    auto shape = ctx->input(0).flat<int64_t>();
    std::vector<int64_t> dims(shape.data(), shape.data() + shape.size());
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, {BPS_AGREEMENT_SLOTS}, &out));
    bps_agreement_row(kind_.c_str(), dtype_.c_str(), 0, dims.data(), static_cast<int32_t>(dims.size()),
                      any_first_dim_ ? 1 : 0, extra_, out->flat<int64_t>().data());
  }

 private:
  std::string kind_, dtype_;
  bool any_first_dim_ = false;
  int64_t extra_ = 0;
};

REGISTER_KERNEL_BUILDER(Name("BytepsAgreementRow").Device(::tensorflow::DEVICE_CPU).HostMemory("shape"),
                        AgreementRowKernel);

REGISTER_OP("BytepsCheckRanksAgree")
    .Input("rows: int64")  // [ranks, slots]: every rank's description
    .Output("checked: int32")  // a scalar 0, for control dependencies
    .Attr("kind: string")
    .Attr("rank: int")
    // Stateful: its output is consumed only by control edges, and Grappler
    // turns a side-effect-free node used that way into a NoOp (no check).
    .SetIsStateful()
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->Scalar());
      return absl::OkStatus();
    })
    .Doc(R"doc(
Fails with FailedPrecondition naming every rank's dtype and shape when the
rows of `rows` (one per rank, all-zero for a rank that sent none) differ.
)doc");


class CheckRanksAgreeKernel : public OpKernel {
 public:
  explicit CheckRanksAgreeKernel(OpKernelConstruction* c) : OpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("kind", &kind_));
    OP_REQUIRES_OK(c, c->GetAttr("rank", &rank_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& rows = ctx->input(0);
    OP_REQUIRES(ctx, rows.dims() == 2 && rows.dim_size(1) == BPS_AGREEMENT_SLOTS &&
                         rank_ >= 0 && rank_ < rows.dim_size(0),
                ::tensorflow::errors::InvalidArgument(
                    "BytepsCheckRanksAgree needs rows [ranks, ", BPS_AGREEMENT_SLOTS,
                    "] holding rank ", rank_, ", got shape ", rows.shape().DebugString()));
    const int64_t* table = rows.flat<int64_t>().data();
    const auto ranks = static_cast<int32_t>(rows.dim_size(0));
    const size_t needed = bps_ranks_disagreement(kind_.c_str(), table, ranks, static_cast<int32_t>(rank_),
                                                 nullptr, 0);
    if (needed != 0) {
      std::string error(needed, '\0');
      bps_ranks_disagreement(kind_.c_str(), table, ranks, static_cast<int32_t>(rank_), &error[0], needed);
      error.resize(needed - 1);
      ctx->CtxFailure(__FILE__, __LINE__, ::tensorflow::errors::FailedPrecondition(error));
      return;
    }
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, {}, &out));
    out->scalar<int32_t>()() = 0;
  }

 private:
  std::string kind_;
  int64_t rank_ = 0;
};

REGISTER_KERNEL_BUILDER(Name("BytepsCheckRanksAgree").Device(::tensorflow::DEVICE_CPU),
                        CheckRanksAgreeKernel);

}  // namespace tf_adapter
}  // namespace byteps_native
