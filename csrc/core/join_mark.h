// Horovod's rule after join(): allgather, alltoall and broadcast fail on the
// ranks still training (only allreduce-style collectives go on, a joined rank
// contributing zeros). A gather's first round (its lengths, an alltoall's
// splits, an unnamed collective's rank-agreement table) has one row per rank;
// a face names it with kJoinMark. A joined rank, standing in for such a round,
// fills its own row with -1, which no training rank ever sends; the summed
// table then says which ranks joined, and the face fails the op on every rank
// still training, before anything depends on the round. The signal travels in
// the data the op sums anyway: no extra round.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"

namespace bps {

// Never produced by the faces' name sanitising (byteps_native/tf/naming.py).
constexpr char kJoinMark[] = "#fails-if-joined";

bool HasJoinMark(const std::string& engine_name);

// OK, or kInvalidArgument (the faces raise their precondition error) naming
// the joined ranks when a row of `summed` (`rows` rows of int32 or int64) is
// all -1 in a round named with kJoinMark. Other names and dtypes: OK.
Status CheckNoRankJoined(const std::string& engine_name, const void* summed, DataType dtype, int64_t rows,
                         int64_t elements);

}  // namespace bps
