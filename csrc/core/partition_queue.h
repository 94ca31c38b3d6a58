// The engine's active partitions in scheduling order: highest priority
// first, then earlier submission, then earlier partition. Inserting an op's
// partitions costs O(log n) each, instead of re-sorting every active
// partition whenever an op arrives; retiring finished ones is one pass.
#pragma once
#include <cstdint>
#include <map>
#include <tuple>

namespace bps {

struct PartitionOrder {
  int32_t priority = 0;
  uint64_t seq = 0;     // submission order of the op (unique per op)
  uint32_t index = 0;   // partition within the op
  bool operator<(const PartitionOrder& o) const {
    return std::make_tuple(-static_cast<int64_t>(priority), seq, index) <
           std::make_tuple(-static_cast<int64_t>(o.priority), o.seq, o.index);
  }
};

template <typename Task>
class PartitionQueue {
 public:
  using Map = std::map<PartitionOrder, Task*>;
  void Insert(const PartitionOrder& order, Task* task) { tasks_.emplace(order, task); }
  template <typename Pred>
  void EraseIf(Pred pred) {
    for (auto it = tasks_.begin(); it != tasks_.end();) {
      if (pred(it->second)) {
        it = tasks_.erase(it);
      } else {
        ++it;
      }
    }
  }
  bool empty() const { return tasks_.empty(); }
  size_t size() const { return tasks_.size(); }
  typename Map::const_iterator begin() const { return tasks_.begin(); }
  typename Map::const_iterator end() const { return tasks_.end(); }

 private:
  Map tasks_;
};

}  // namespace bps
