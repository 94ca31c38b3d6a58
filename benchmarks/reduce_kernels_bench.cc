// GB/s of the summation kernels (csrc/common/reduce_kernels.h), per dtype
// and per instruction-set level; built and run by reduce_kernels_bench.sh.
//
//   reduce_kernels_bench [LABEL]
//
// Kernels, as the engine calls them:
//   accumulate   the server's acc += push (16-bit types: acc is float32)
//   reduce2      the local reduce of 2 inputs into a third buffer (sum only)
//   reduce4      the same with 4 inputs
//   to_wire      the server's float32 accumulator narrowed to a 16-bit answer
// GB/s counts the input bytes in wire format (what arrives from the network
// or the other ranks) per second: the rate at which a kernel keeps up with
// its link, per CPU-second of the calling thread (best of 40 short runs).
// Built against a tree without ISA levels (before this benchmark existed),
// it measures that tree's kernels once, as level "before".
#include <algorithm>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/reduce_kernels.h"

namespace {

using bps::DataType;

// CPU seconds of this thread per call: the host is shared, and wall time
// would count the time other processes held the core. Runs of about 2 ms,
// best of 40, so that some run sees neither a preemption nor a cold cache.
double ThreadSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double SecondsPerCall(const std::function<void()>& fn, size_t bytes_per_call) {
  const size_t calls = std::max<size_t>(1, (size_t(16) << 20) / std::max<size_t>(bytes_per_call, 1));
  fn();
  double best = 1e9;
  for (int rep = 0; rep < 40; ++rep) {
    const double t0 = ThreadSeconds();
    for (size_t i = 0; i < calls; ++i) fn();
    best = std::min(best, (ThreadSeconds() - t0) / calls);
  }
  return best;
}

// 64-byte aligned, as the server's buffers are (AlignedBuffer).
struct Buffer {
  explicit Buffer(size_t n) : bytes(n) {
    if (posix_memalign(reinterpret_cast<void**>(&p), 64, n) != 0) abort();
    memset(p, 0, n);
  }
  ~Buffer() { free(p); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  char* data() { return p; }
  size_t size() const { return bytes; }
  char* p = nullptr;
  size_t bytes;
};

void Fill(Buffer* v, DataType t) {
  // Small values: no overflow to inf, so no special-case slow paths.
  const size_t n = v->size() / bps::DataTypeSize(t);
  for (size_t i = 0; i < n; ++i) {
    const float f = static_cast<float>(static_cast<int>(i % 23) - 11) * 0.25f;
    switch (t) {
      case DataType::kFloat32: reinterpret_cast<float*>(v->data())[i] = f; break;
      case DataType::kFloat64: reinterpret_cast<double*>(v->data())[i] = f; break;
      case DataType::kFloat16: reinterpret_cast<uint16_t*>(v->data())[i] = bps::FloatToHalf(f); break;
      case DataType::kBFloat16: reinterpret_cast<uint16_t*>(v->data())[i] = bps::FloatToBFloat16(f); break;
      case DataType::kInt32: reinterpret_cast<int32_t*>(v->data())[i] = static_cast<int32_t>(i % 23); break;
      case DataType::kInt64: reinterpret_cast<int64_t*>(v->data())[i] = static_cast<int64_t>(i % 23); break;
      case DataType::kUInt8: reinterpret_cast<uint8_t*>(v->data())[i] = static_cast<uint8_t>(i % 23); break;
    }
  }
}

void RunLevel(const char* level, size_t bytes) {
  const DataType types[] = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16,
                            DataType::kInt32,   DataType::kInt64,   DataType::kUInt8};
  for (DataType t : types) {
    const size_t esz = bps::DataTypeSize(t), count = bytes / esz;
    Buffer in0(bytes), in1(bytes), in2(bytes), in3(bytes), out(bytes), acc(count * bps::AccumulatorElementSize(t));
    Buffer* in[4] = {&in0, &in1, &in2, &in3};
    for (Buffer* v : in) Fill(v, t);
    bps::Accumulate(acc.data(), in[0]->data(), count, t, true);
    const void* ptrs[4] = {in[0]->data(), in[1]->data(), in[2]->data(), in[3]->data()};
    auto report = [&](const char* kernel, double seconds, size_t input_bytes) {
      printf("%-7s %-9s %-10s %6zu KB %8.2f GB/s\n", level, bps::DataTypeName(t), kernel, bytes >> 10,
             input_bytes / seconds / 1e9);
      fflush(stdout);
    };
    report("accumulate",
           SecondsPerCall([&] { bps::Accumulate(acc.data(), in[1]->data(), count, t, false); }, bytes), bytes);
    report("reduce2",
           SecondsPerCall([&] { bps::ReduceInputs(ptrs, 2, count, t, out.data(), nullptr, 1); }, 2 * bytes),
           2 * bytes);
    report("reduce4",
           SecondsPerCall([&] { bps::ReduceInputs(ptrs, 4, count, t, out.data(), nullptr, 1); }, 4 * bytes),
           4 * bytes);
    if (bps::IsHalfType(t)) {
      report("to_wire",
             SecondsPerCall([&] { bps::AccumulatorToWire(out.data(), acc.data(), count, t); }, bytes), bytes);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string label = argc > 1 ? argv[1] : "";
  const size_t sizes[] = {size_t(256) << 10, size_t(4) << 20};  // L2-resident; BytePS's default partition
#ifdef BPS_REDUCE_KERNELS_HAVE_ISA
  for (size_t bytes : sizes) {
    for (bps::ReduceIsa isa : {bps::ReduceIsa::kBaseline, bps::ReduceIsa::kAvx2, bps::ReduceIsa::kAvx512}) {
      if (!bps::SetReduceIsaForTesting(isa)) {
        printf("# %s: not supported on this CPU\n", bps::ReduceIsaName(isa));
        continue;
      }
      RunLevel(label.empty() ? bps::ReduceIsaName(isa) : label.c_str(), bytes);
    }
  }
#else
  for (size_t bytes : sizes) RunLevel(label.empty() ? "before" : label.c_str(), bytes);
#endif
  return 0;
}
