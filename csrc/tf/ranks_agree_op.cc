// BytepsCheckRanksAgree: fails with FailedPrecondition, on every rank, when
// the ranks described a collective's tensor differently.
//
// Why an op: an unnamed collective's engine name derives from its dtype and
// shape, so ranks that disagree would each wait for a peer under a different
// name until BYTEPS_TIMEOUT. The Python side first sums a small table (one row
// per rank: kind, dtype, rank, extra, dims) through BytepsPushPull; this op
// compares the rows. As a real op it raises the error class Horovod raises
// (FailedPreconditionError), eagerly and in graphs alike, where a
// tf.py_function would wrap it as UnknownError.
#include <algorithm>
#include <string>

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

// Row layout, shared with byteps_native/tf/collectives.py (check_ranks_agree).
constexpr int kKindSlot = 0;   // 0: the rank sent nothing (absent)
constexpr int kDtypeSlot = 1;  // DataType enum
constexpr int kRankSlot = 2;   // number of dimensions
constexpr int kExtraSlot = 3;  // 1 + root rank or reduce op; 0: none
constexpr int kFirstDimSlot = 4;
constexpr int64_t kAnyDim = -2;  // gathers: any first dimension

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

namespace {

// TensorFlow's Python names (float32, not C++'s "float").
std::string DtypeName(int64_t value) {
  if (value <= 0 || !::tensorflow::DataType_IsValid(static_cast<int>(value))) return "?";
  const auto dtype = static_cast<::tensorflow::DataType>(value);
  switch (dtype) {
    case ::tensorflow::DT_FLOAT: return "float32";
    case ::tensorflow::DT_DOUBLE: return "float64";
    case ::tensorflow::DT_HALF: return "float16";
    default: return ::tensorflow::DataTypeString(dtype);
  }
}

std::string DescribeRow(const int64_t* row, int64_t slots) {
  std::string out = DtypeName(row[kDtypeSlot]) + " [";
  const int64_t dims = std::min<int64_t>(row[kRankSlot], slots - kFirstDimSlot);
  for (int64_t d = 0; d < dims; ++d) {
    if (d) out += ", ";
    const int64_t size = row[kFirstDimSlot + d];
    out += size == kAnyDim ? "*" : std::to_string(size);
  }
  out += "]";
  if (row[kExtraSlot] != 0) out += " (" + std::to_string(row[kExtraSlot] - 1) + ")";
  return out;
}

}  // namespace

class CheckRanksAgreeKernel : public OpKernel {
 public:
  explicit CheckRanksAgreeKernel(OpKernelConstruction* c) : OpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("kind", &kind_));
    OP_REQUIRES_OK(c, c->GetAttr("rank", &rank_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& rows = ctx->input(0);
    OP_REQUIRES(ctx, rows.dims() == 2 && rows.dim_size(1) > kFirstDimSlot &&
                         rank_ >= 0 && rank_ < rows.dim_size(0),
                ::tensorflow::errors::InvalidArgument(
                    "BytepsCheckRanksAgree needs rows [ranks, >", kFirstDimSlot,
                    "] holding rank ", rank_, ", got shape ", rows.shape().DebugString()));
    const int64_t ranks = rows.dim_size(0), slots = rows.dim_size(1);
    auto flat = rows.flat<int64_t>();
    const int64_t* mine = flat.data() + rank_ * slots;
    bool agree = true;
    std::string what;
    for (int64_t r = 0; r < ranks; ++r) {
      const int64_t* row = flat.data() + r * slots;
      if (row[kKindSlot] == 0) continue;  // absent
      if (!what.empty()) what += ", ";
      what += "rank " + std::to_string(r) + ": " + DescribeRow(row, slots);
      for (int64_t s = 0; s < slots; ++s) agree = agree && row[s] == mine[s];
    }
    OP_REQUIRES(ctx, agree,
                ::tensorflow::errors::FailedPrecondition(
                    kind_, ": ranks disagree on the tensor's dtype or shape (or root rank / op): ",
                    what, "; every rank must pass the same dtype and shape (gathers: all but the "
                    "first dimension)"));
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
