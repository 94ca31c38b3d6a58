#include "core/fusion_plan.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <tuple>
#include <utility>

#include "common/hashing.h"

namespace bps {

std::vector<FusionBucket> PlanFusion(const std::vector<FusionCandidate>& group, int64_t limit) {
  std::vector<size_t> order(group.size());
  std::iota(order.begin(), order.end(), 0);
  // Stable: equal priorities keep the caller's order, which every rank shares.
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return group[a].priority > group[b].priority; });
  std::vector<FusionBucket> buckets;
  // The bucket still taking members, per (dtype, reduce op, compression): its index and bytes.
  std::map<std::tuple<int, int, int>, std::pair<size_t, int64_t>> open;
  for (size_t i : order) {
    const FusionCandidate& c = group[i];
    if (c.alone || limit <= 0 || c.bytes >= limit) {
      buckets.push_back(FusionBucket{{i}, c.priority});
      continue;
    }
    const auto kind = std::make_tuple(static_cast<int>(c.dtype), static_cast<int>(c.reduce_op), c.compression);
    auto it = open.find(kind);
    if (it != open.end() && it->second.second + c.bytes > limit) {
      open.erase(it);
      it = open.end();
    }
    if (it == open.end()) {
      buckets.push_back(FusionBucket{{}, c.priority});
      it = open.emplace(kind, std::make_pair(buckets.size() - 1, int64_t{0})).first;
    }
    buckets[it->second.first].members.push_back(i);
    it->second.second += c.bytes;
  }
  return buckets;
}

std::string FusedBucketName(const std::vector<std::string>& member_names, DataType dtype, ReduceOp reduce_op) {
  // Names may hold any byte but NUL, so NUL separates them unambiguously.
  std::string all = std::string(DataTypeName(dtype)) + (reduce_op == ReduceOp::kAverage ? "/average" : "/sum");
  for (const std::string& name : member_names) {
    all.push_back('\0');
    all += name;
  }
  char hash[20];
  snprintf(hash, sizeof(hash), "%016llx", static_cast<unsigned long long>(HashName(all)));
  const std::string first = member_names.empty() ? "" : member_names.front();
  const std::string last = member_names.empty() ? "" : member_names.back();
  return "fused." + std::string(hash) + "[" + first + ".." + last + " x" + std::to_string(member_names.size()) + "]";
}

std::string FusedBucketShape(const std::vector<std::string>& member_shapes) {
  std::string text = "fused{";
  for (size_t i = 0; i < member_shapes.size(); ++i) text += (i ? ", " : "") + member_shapes[i];
  return text + "}";
}

}  // namespace bps
