// CPU milliseconds per MB of float32 input of topk's selection (the k
// largest |x|, ties to the lower index): the radix select of
// csrc/compression/topk_select.cc ("radix") against the comparison
// selection it replaced ("nth_element", copied below as compressor.cc had
// it until commit c68038f). Built and run by topk_select_bench.sh.
//
//   topk_select_bench
//
// Each line: input kind, slice size, ratio, ms/MB of each, the speedup, and
// whether both chose the same indices (the run fails if not). Inputs:
// "normal" (a gradient-like N(0, 1)) and "ties" (N(0, 1) rounded to 1/8, so
// the k-th largest |x| is shared by many elements and the tie rule decides).
// Time is this thread's CPU time, best of several runs: the host is shared.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <random>
#include <vector>

#include "compression/topk_select.h"

namespace {

// The selection before the radix select: nth_element over an index array
// with |x| compared as floats, then a sort of the k chosen.
void NthElementTopK(const float* x, uint32_t n, uint32_t k, std::vector<uint32_t>* out) {
  thread_local std::vector<uint32_t> order;
  order.resize(n);
  for (uint32_t i = 0; i < n; ++i) order[i] = i;
  auto larger = [x](uint32_t a, uint32_t b) {
    const float fa = std::fabs(x[a]), fb = std::fabs(x[b]);
    return fa > fb || (fa == fb && a < b);
  };
  if (k < n) std::nth_element(order.begin(), order.begin() + k, order.end(), larger);
  out->assign(order.begin(), order.begin() + k);
  std::sort(out->begin(), out->end());
}

double ThreadSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double BestSeconds(const std::function<void()>& fn, int runs) {
  double best = 1e30;
  for (int r = 0; r < runs; ++r) {
    const double t0 = ThreadSeconds();
    fn();
    best = std::min(best, ThreadSeconds() - t0);
  }
  return best;
}

}  // namespace

int main() {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  bool all_same = true;
  printf("%-7s %10s %7s %16s %11s %8s %s\n", "input", "elements", "ratio", "nth_element ms/MB", "radix ms/MB",
         "speedup", "same indices");
  for (const char* kind : {"normal", "ties"}) {
    for (uint32_t n : {262144u, 1048576u, 4194304u}) {
      std::vector<float> x(n);
      for (auto& v : x) v = normal(rng);
      if (kind[0] == 't') {
        for (auto& v : x) v = std::round(v * 8.0f) / 8.0f;
      }
      const double mb = n * sizeof(float) / 1e6;
      const int runs = n >= 4194304u ? 5 : 15;
      for (double ratio : {0.01, 0.001}) {
        const uint32_t k = std::max<uint32_t>(1, static_cast<uint32_t>(n * ratio));
        std::vector<uint32_t> before, after;
        const double old_s = BestSeconds([&] { NthElementTopK(x.data(), n, k, &before); }, runs);
        const double new_s = BestSeconds([&] { bps::TopKIndices(x.data(), n, k, &after); }, runs);
        const bool same = before == after;
        all_same = all_same && same;
        printf("%-7s %10u %7g %16.3f %11.3f %7.1fx %s\n", kind, n, ratio, old_s * 1e3 / mb, new_s * 1e3 / mb,
               old_s / new_s, same ? "yes" : "NO");
      }
    }
  }
  return all_same ? 0 : 1;
}
