// Horovod's rule after join(): allgather, alltoall and broadcast fail on the
// ranks still training (only allreduce-style collectives go on, a joined rank
// contributing zeros). A gather's first round (its lengths, an alltoall's
// splits, an unnamed collective's rank-agreement table) has one row per rank;
// its engine name carries kJoinMark (byteps_native/tf/collectives.py). A
// joined rank, standing in for such an op (byteps_native/tf/join_protocol.py),
// fills its own row with -1, which no training rank ever sends. The kernel
// then fails the op with FailedPrecondition on every rank still training,
// eagerly and in graphs alike, before anything depends on the round. The
// signal travels in the data the op sums anyway: no extra round.
#ifndef BYTEPS_NATIVE_TF_JOINED_RANKS_CHECK_H_
#define BYTEPS_NATIVE_TF_JOINED_RANKS_CHECK_H_

#include <string>

#include "tensorflow/core/framework/tensor.h"

namespace byteps_native {
namespace tf_adapter {

// Never produced by naming.sanitize (byteps_native/tf/naming.py).
constexpr char kJoinMark[] = "#fails-if-joined";

bool HasJoinMark(const std::string& engine_name);

// OK, or FailedPrecondition naming the joined ranks when a row of `summed`
// (first dimension: ranks; int32 or int64) is all -1.
absl::Status CheckNoRankJoined(const std::string& engine_name, const ::tensorflow::Tensor& summed);

}  // namespace tf_adapter
}  // namespace byteps_native

#endif  // BYTEPS_NATIVE_TF_JOINED_RANKS_CHECK_H_
