#include "tf/joined_ranks_check.h"

#include <cstdint>
#include <vector>

#include "tensorflow/core/framework/types.h"

namespace byteps_native {
namespace tf_adapter {
namespace {

template <typename T>
std::vector<int64_t> JoinedRows(const ::tensorflow::Tensor& summed) {
  std::vector<int64_t> joined;
  const int64_t rows = summed.dim_size(0);
  if (rows == 0) return joined;
  const int64_t width = summed.NumElements() / rows;
  auto flat = summed.flat<T>();
  for (int64_t r = 0; r < rows && width > 0; ++r) {
    bool all_minus_one = true;
    for (int64_t i = 0; i < width && all_minus_one; ++i) {
      all_minus_one = flat(r * width + i) == T(-1);
    }
    if (all_minus_one) joined.push_back(r);
  }
  return joined;
}

// "allgather" from "bps.tf.agree.allgather.2" or "bps.tf.allgather/x.lengths"
// (the names byteps_native/tf/collectives.py gives these rounds).
std::string CollectiveOf(const std::string& round) {
  const std::string prefix = "bps.tf.", agree = "agree.";
  if (round.compare(0, prefix.size(), prefix) != 0) return "a collective";
  std::string rest = round.substr(prefix.size());
  if (rest.compare(0, agree.size(), agree) == 0) {
    rest = rest.substr(agree.size());
    return rest.substr(0, rest.find('.'));
  }
  return rest.substr(0, rest.find('/'));
}

}  // namespace

bool HasJoinMark(const std::string& engine_name) {
  return engine_name.find(kJoinMark) != std::string::npos;
}

absl::Status CheckNoRankJoined(const std::string& engine_name, const ::tensorflow::Tensor& summed) {
  if (!HasJoinMark(engine_name) || summed.dims() == 0) return absl::OkStatus();
  std::vector<int64_t> joined;
  if (summed.dtype() == ::tensorflow::DT_INT64) {
    joined = JoinedRows<int64_t>(summed);
  } else if (summed.dtype() == ::tensorflow::DT_INT32) {
    joined = JoinedRows<int32_t>(summed);
  }
  if (joined.empty()) return absl::OkStatus();
  std::string ranks;
  for (size_t i = 0; i < joined.size(); ++i) {
    ranks += (i ? ", " : "") + std::to_string(joined[i]);
  }
  const std::string round = engine_name.substr(0, engine_name.find(kJoinMark));
  return absl::FailedPreconditionError(
      CollectiveOf(round) + " cannot run while a rank has joined: rank(s) " + ranks +
      " called join() (its round '" + round + "' failed). As in Horovod, only allreduce-style "
      "collectives go on after a join(), the joined ranks contributing zeros; allgather, alltoall, "
      "broadcast and the *_object calls fail until every rank has called join(). This rank may "
      "catch the error and go on; call join() here too once this rank's data ends");
}

}  // namespace tf_adapter
}  // namespace byteps_native
