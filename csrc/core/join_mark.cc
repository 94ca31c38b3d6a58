#include "core/join_mark.h"

namespace bps {
namespace {

template <typename T>
std::vector<int64_t> JoinedRows(const T* flat, int64_t rows, int64_t elements) {
  std::vector<int64_t> joined;
  if (rows <= 0) return joined;
  const int64_t width = elements / rows;
  for (int64_t r = 0; r < rows && width > 0; ++r) {
    bool all_minus_one = true;
    for (int64_t i = 0; i < width && all_minus_one; ++i) all_minus_one = flat[r * width + i] == T(-1);
    if (all_minus_one) joined.push_back(r);
  }
  return joined;
}

// "allgather" from "bps.tf.agree.allgather.2", "bps.tf.allgather/x.lengths"
// (TF) or "agree.broadcast.2", "joined.broadcast.2" (torch): the names the
// faces give these rounds.
std::string CollectiveOf(const std::string& round) {
  std::string rest = round;
  if (rest.compare(0, 4, "bps.") == 0) {  // "bps.<face>."
    const size_t face_end = rest.find('.', 4);
    rest = face_end == std::string::npos ? std::string() : rest.substr(face_end + 1);
  }
  for (const char* kind_prefix : {"agree.", "joined."}) {
    const std::string p = kind_prefix;
    if (rest.compare(0, p.size(), p) == 0) {
      rest = rest.substr(p.size());
      return rest.substr(0, rest.find('.'));
    }
  }
  rest = rest.substr(0, rest.find_first_of("/."));
  return rest.empty() ? "a collective" : rest;
}

}  // namespace

bool HasJoinMark(const std::string& engine_name) { return engine_name.find(kJoinMark) != std::string::npos; }

Status CheckNoRankJoined(const std::string& engine_name, const void* summed, DataType dtype, int64_t rows,
                         int64_t elements) {
  if (!HasJoinMark(engine_name) || summed == nullptr) return Status::OK();
  std::vector<int64_t> joined;
  if (dtype == DataType::kInt64) {
    joined = JoinedRows(static_cast<const int64_t*>(summed), rows, elements);
  } else if (dtype == DataType::kInt32) {
    joined = JoinedRows(static_cast<const int32_t*>(summed), rows, elements);
  }
  if (joined.empty()) return Status::OK();
  std::string ranks;
  for (size_t i = 0; i < joined.size(); ++i) ranks += (i ? ", " : "") + std::to_string(joined[i]);
  const std::string round = engine_name.substr(0, engine_name.find(kJoinMark));
  return Status::Invalid(CollectiveOf(round) + " cannot run while a rank has joined: rank(s) " + ranks +
                         " called join() (its round '" + round + "' failed). As in Horovod, only allreduce-style "
                         "collectives go on after a join(), the joined ranks contributing zeros; allgather, alltoall, "
                         "broadcast and the *_object calls fail until every rank has called join(). This rank may "
                         "catch the error and go on; call join() here too once this rank's data ends");
}

}  // namespace bps
