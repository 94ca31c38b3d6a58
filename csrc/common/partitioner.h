// How a tensor is cut into partitions, partitions into per-local-rank slices,
// and slices spread over servers -- deterministically, so every rank of every
// machine derives the same plan from the name and size alone.
#pragma once
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

namespace bps {

struct Range {
  int64_t offset = 0;  // elements
  int64_t count = 0;
};

// Partitions of at most partition_bytes. When more than one partition is
// needed and there are servers, the count is raised to a multiple of
// servers / gcd(local_size, servers) so every server gets the same bytes.
inline std::vector<Range> PlanPartitions(int64_t count, int64_t elem_size, int64_t partition_bytes, int local_size,
                                         int num_servers) {
  const int64_t total = count * elem_size;
  int64_t parts = std::max<int64_t>(1, (total + partition_bytes - 1) / partition_bytes);
  if (parts > 1 && num_servers > 1) {
    int64_t step = num_servers / std::gcd<int64_t>(local_size, num_servers);
    parts = (parts + step - 1) / step * step;
  }
  parts = std::min<int64_t>(parts, std::max<int64_t>(count, 1));
  // Partition boundaries on 16-element multiples keep slices vector-aligned.
  std::vector<Range> out;
  const int64_t per = (count + parts - 1) / parts;
  const int64_t aligned = std::max<int64_t>(16, (per + 15) / 16 * 16);
  for (int64_t off = 0; off < count || (count == 0 && out.empty()); off += aligned) {
    out.push_back(Range{off, std::min(aligned, count - off)});
    if (count == 0) break;
  }
  return out;
}

// The device (NCCL) path's partitions: NCCL's reduce-scatter cuts equal
// slices, so every partition but the last holds a multiple of L * 16
// elements (equal, vector-aligned slices without padding); the last is
// padded up to L equal slices by the caller. Same size bound as the host path.
inline std::vector<Range> PlanEqualSlicePartitions(int64_t count, int64_t elem_size, int64_t partition_bytes,
                                                   int local_size) {
  const int64_t unit = static_cast<int64_t>(local_size) * 16;
  const int64_t per = std::max<int64_t>(unit, partition_bytes / elem_size / unit * unit);
  std::vector<Range> out;
  for (int64_t off = 0; off < count || (count == 0 && out.empty()); off += per) {
    out.push_back(Range{off, std::min(per, count - off)});
    if (count == 0) break;
  }
  return out;
}

// Slice q of a partition of n elements across L local ranks (may be empty).
inline Range SliceOf(int64_t n, int local_size, int q) {
  const int64_t per = std::max<int64_t>(16, ((n + local_size - 1) / local_size + 15) / 16 * 16);
  const int64_t off = std::min(n, per * q);
  return Range{off, std::min(per, n - off)};
}

// Machines of different sizes (issue 29): a machine of L local ranks cuts a
// partition into its L slices; the job's network slices are the common
// refinement of every distinct L's cuts, so each network slice lies inside
// one local slice of every machine and the servers see one contribution per
// machine per network slice. With equal machines they are the L slices
// themselves (empty ones included), as before. `slice_of(n, L, q)` is the
// reducer's geometry (host and device slices round differently).
template <typename SliceFn>
std::vector<Range> NetworkSlices(int64_t n, const std::vector<int>& local_sizes, SliceFn slice_of) {
  std::vector<Range> out;
  if (local_sizes.size() == 1) {
    for (int q = 0; q < local_sizes[0]; ++q) out.push_back(slice_of(n, local_sizes[0], q));
    return out;
  }
  std::vector<int64_t> cuts{0, n};
  for (int L : local_sizes) {
    for (int q = 0; q < L; ++q) cuts.push_back(std::min(n, slice_of(n, L, q).offset));
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  for (size_t i = 0; i + 1 < cuts.size(); ++i) out.push_back(Range{cuts[i], cuts[i + 1] - cuts[i]});
  if (out.empty()) out.push_back(Range{0, 0});
  return out;
}

// The most network slices a partition can have: the ServerFor stride (L
// with equal machines, so their servers stay as before).
inline int NetworkSliceStride(const std::vector<int>& local_sizes) {
  int stride = 1;
  for (int L : local_sizes) stride += L - 1;
  return stride;
}

// The least common multiple of the local sizes: the device path's partition
// unit (lcm * 16 elements) so every machine's equal slices tile its partitions alike.
inline int64_t LocalSizesLcm(const std::vector<int>& local_sizes) {
  int64_t l = 1;
  for (int L : local_sizes) l = std::lcm<int64_t>(l, L);
  return l;
}

// Consecutive slices of a tensor go round-robin over servers, starting at a
// name-derived server so small tensors spread too.
inline int ServerFor(uint64_t name_hash, uint32_t partition, int slice, int local_size, int num_servers) {
  uint64_t seq = static_cast<uint64_t>(partition) * static_cast<uint64_t>(local_size) + static_cast<uint64_t>(slice);
  return static_cast<int>((name_hash % static_cast<uint64_t>(num_servers) + seq) % static_cast<uint64_t>(num_servers));
}

}  // namespace bps
