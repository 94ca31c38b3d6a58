// CPU milliseconds of a server's topk round per MB of slice (issue 39): the
// dense sum (decode every machine's push into a zeroed slice, then select the
// top machines x k of it: csrc/server's path until the sparse sum) against
// the sparse sum of csrc/compression/topk_sum.h, which merges the pushes'
// entries. Both write the same payload (the run fails if not). Built and run
// by topk_sum_bench.sh.
//
// Each line: slice elements, machines, ratio, ms per MB of slice for each,
// and the speedup. Pushes come from the real codec on N(0, 1) slices. Time is
// this thread's CPU time, best of several runs: the host is shared.
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <vector>

#include "compression/compressor.h"
#include "compression/topk_sum.h"

namespace {

double CpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

template <typename F>
double Best(F&& f, int runs) {
  double best = 1e30;
  for (int r = 0; r < runs; ++r) {
    const double t0 = CpuSeconds();
    f();
    best = std::min(best, CpuSeconds() - t0);
  }
  return best;
}

}  // namespace

int main() {
  using namespace bps;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  bool same = true;
  std::printf("%10s %8s %6s %14s %15s %8s\n", "elements", "machines", "ratio", "dense ms/MB", "sparse ms/MB", "speedup");
  for (uint32_t count : {262144u, 1048576u}) {
    for (uint32_t machines : {2u, 4u}) {
      for (double ratio : {0.001, 0.01, 0.05}) {
        CompressionSpec spec;
        ParseCompressionSpec("topk:ratio=" + std::to_string(ratio) + ",ef=0", &spec);
        const CodecHeader h = MakeCodecHeader(spec, count);
        std::vector<std::vector<char>> pushes;
        std::vector<float> x(count);
        for (uint32_t m = 0; m < machines; ++m) {
          for (auto& v : x) v = normal(rng);
          pushes.emplace_back(CompressedBytes(h));
          Compress(h, x.data(), nullptr, 1, 0, pushes.back().data());
        }
        const CodecHeader answer = AnswerCodec(h, machines);
        std::vector<char> dense_out(CompressedBytes(answer)), sparse_out(CompressedBytes(answer));
        std::vector<float> acc(count);
        const double dense = Best([&] {
          for (uint32_t m = 0; m < machines; ++m) {
            if (m == 0) {
              Decompress(pushes[m].data(), 1, 0, acc.data());
            } else {
              DecompressAdd(pushes[m].data(), 1, 0, acc.data());
            }
          }
          Compress(answer, acc.data(), nullptr, 1, 0, dense_out.data());
        }, 7);
        SparseTopKSum sum;
        const double sparse = Best([&] {
          sum.Clear();
          for (const auto& p : pushes) sum.Add(p.data() + sizeof(CodecHeader), h.k, h.count);
          std::memcpy(sparse_out.data(), &answer, sizeof(answer));
          sum.WriteAnswer(answer, sparse_out.data() + sizeof(answer));
        }, 7);
        same = same && dense_out == sparse_out;
        const double mb = count * 4.0 / 1e6;
        std::printf("%10u %8u %6.3f %14.3f %15.3f %7.1fx\n", count, machines, ratio, 1e3 * dense / mb,
                    1e3 * sparse / mb, dense / sparse);
      }
    }
  }
  if (!same) std::printf("the two sums wrote different payloads\n");
  return same ? 0 : 1;
}
