// An accepted push_pull as the engine thread sees it.
#include "core/tensor_op.h"

#include <sstream>

#include "common/hashing.h"

namespace bps {

std::string ShapeString(const TensorView& t) {
  std::ostringstream s;
  s << "[";
  if (t.shape && t.ndim > 0) {
    for (int i = 0; i < t.ndim; ++i) s << (i ? ", " : "") << t.shape[i];
  } else {
    s << t.num_elements;
  }
  s << "]";
  return s.str();
}

namespace {

// What local ranks compare in shared memory and servers across machines.
uint64_t SignatureOf(DataType dtype, const std::string& shape, bool average) {
  return HashName(std::string(DataTypeName(dtype)) + shape + (average ? " average" : " sum"));
}

}  // namespace

std::unique_ptr<TensorOp> TensorOp::FromSubmission(const TensorView& input, void* output, const std::string& name,
                                                   int32_t priority, ReduceOp reduce_op) {
  auto op = std::make_unique<TensorOp>();
  op->failure = Status::OK();
  op->name = name;
  op->name_hash = HashName(name);
  op->input = static_cast<const char*>(input.data);
  op->output = static_cast<char*>(output);
  op->dtype = static_cast<DataType>(input.dtype);
  op->count = input.num_elements;
  op->shape = ShapeString(input);
  op->signature = SignatureOf(op->dtype, op->shape, reduce_op == ReduceOp::kAverage);
  op->priority = priority;
  op->average = reduce_op == ReduceOp::kAverage;
  op->shape_and_op = op->shape + (op->average ? " (average)" : " (sum)");
  return op;
}

void TensorOp::DescribeShapeAs(const std::string& described) {
  shape = described;
  signature = SignatureOf(dtype, shape, average);
  shape_and_op = shape + (average ? " (average)" : " (sum)");
}

}  // namespace bps
