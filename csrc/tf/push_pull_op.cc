// Definition of the BytepsPushPull op: the graph-level contract, independent
// of any device. Kernels live in push_pull_kernel.cc.
//
// One op carries a *list* of tensors of possibly different dtypes. Why a list:
// the op must be stateful (otherwise Grappler constant-folds a push_pull of a
// constant at graph-optimisation time, and prunes/dedups it freely), and
// tf.function chains all stateful ops without resource inputs in program
// order. A list op lets all buckets of one gradient reduction be in flight in
// the engine at once while staying a single stateful node.
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace byteps_native {
namespace tf_adapter {

REGISTER_OP("BytepsPushPull")
    .Input("tensors: T")
    // Empty, or one string per tensor appended to its name at run time
    // ("name@suffix"). For tensors whose size is only known at run time: the
    // engine fixes a name's size on first use, so the Python side passes the
    // element count here and each distinct size gets its own stable name.
    .Input("name_suffixes: string")
    .Output("reduced: T")
    .Attr("T: list({float, double, half, bfloat16, int32, int64, uint8}) >= 1")
    // Engine-wide identities, one per tensor: deterministic across processes
    // and stable across steps (each distinct name holds engine memory).
    .Attr("tensor_names: list(string)")
    // Higher goes first on the network; empty means all 0.
    .Attr("priorities: list(int) = []")
    // false: sum over processes; true: sum divided by the number of
    // processes (the engine's size, not the number of replicas).
    .Attr("average: bool = false")
    // CommunicationOptions.timeout_seconds: > 0 fails the op with
    // DeadlineExceeded after that many seconds (0: only BYTEPS_TIMEOUT).
    .Attr("timeout_seconds: float = 0")
    // Tensor fusion in the engine (bps_push_pull_group_async): the tensors
    // go as one group, host tensors of one dtype packed into buckets of at
    // most this many bytes (0: each alone; < 0: BYTEPS_FUSION_BYTES).
    .Attr("fusion_bytes: int = 0")
    .SetIsStateful()
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, c->input(i));
      return absl::OkStatus();
    })
    .Doc(R"doc(
Sums (or averages) every tensor across all BytePS processes through the
byteps-native engine. Output i has the shape and dtype of input i.
)doc");

}  // namespace tf_adapter
}  // namespace byteps_native
