// Definition of the BytepsLocalPushPull op: the per-replica all-reduce of a
// process with several local replicas (CrossDeviceOps._all_reduce, the path
// without merge_call). Each local replica runs its own instance; the
// instances of one round meet in the process (local_push_pull_kernel.cc),
// the last to arrive forms the local result once, submits it to the engine
// once, and every instance finishes with that result.
//
// Why not stateful-in-program-order like BytepsPushPull: tf.function chains
// stateful ops without resource inputs in program order, and the replicas'
// instances are traced one after another (replica 0's, then replica 1's), so
// a chain would make replica 1's instance wait for replica 0's to finish --
// which waits for replica 1's. The Python face adds this op type to
// TensorFlow's ASYNC_STATEFUL_OPS (auto_control_deps.py), as TensorFlow does
// for its own collectives, for the same reason.
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace byteps_native {
namespace tf_adapter {

REGISTER_OP("BytepsLocalPushPull")
    .Input("tensors: T")
    .Output("results: T")
    .Attr("T: list({float, double, half, bfloat16, int32, int64, uint8}) >= 1")
    // Engine names, one per tensor (identical on every local replica).
    .Attr("tensor_names: list(string)")
    // The rendezvous: instances with the same round meet; one per call.
    .Attr("round: string")
    .Attr("replica: int >= 0")
    .Attr("replicas: int >= 1")
    // "sum": the local replicas' tensors added; "first": replica 0's (every
    // replica passes the same value); "concat": concatenated along axis 0 in
    // replica order (rows may differ, trailing dimensions may not).
    .Attr("local_op: {'sum', 'first', 'concat'}")
    // true: the local result then goes to the engine, summed over processes.
    .Attr("push: bool")
    .Attr("average: bool = false")
    .Attr("priorities: list(int) = []")
    // CommunicationOptions.timeout_seconds: the whole op (0: none of its own).
    .Attr("timeout_seconds: float = 0")
    // Tensor fusion in the engine for the pushed result (as BytepsPushPull's).
    .Attr("fusion_bytes: int = 0")
    // How long an instance waits for the other local replicas (BYTEPS_TIMEOUT).
    .Attr("wait_seconds: float")
    .SetIsStateful()
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      std::string local_op;
      TF_RETURN_IF_ERROR(c->GetAttr("local_op", &local_op));
      for (int i = 0; i < c->num_outputs(); ++i) {
        if (local_op != "concat" || !c->RankKnown(c->input(i)) || c->Rank(c->input(i)) == 0) {
          c->set_output(i, c->input(i));
          continue;
        }
        ::tensorflow::shape_inference::ShapeHandle out;
        TF_RETURN_IF_ERROR(c->ReplaceDim(c->input(i), 0, c->UnknownDim(), &out));
        c->set_output(i, out);
      }
      return absl::OkStatus();
    })
    .Doc(R"doc(
One local replica's part of a per-replica all-reduce: the local replicas'
tensors are combined in the process (local_op), then optionally summed across
every BytePS process in one engine submission; each replica gets the result.
)doc");

}  // namespace tf_adapter
}  // namespace byteps_native
