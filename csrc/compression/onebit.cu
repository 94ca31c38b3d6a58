// onebit's kernels (device_codec.h), the twin of onebit.cc: one warp per
// 32-bit word of sign bits packs it and adds its elements' |c| into their
// segments' double-precision sums; then the scales; then error feedback.
// Per-element code: onebit_element.h.
#include <cuda_runtime.h>

#include "compression/device_codec.h"
#include "compression/device_launch.h"
#include "compression/error_feedback_element.h"
#include "compression/onebit_element.h"

namespace bps {
namespace {

using device_launch::Blocks;
using device_launch::kThreads;

constexpr unsigned kFullWarp = 0xffffffffu;
constexpr uint32_t kNoSegment = 0xffffffffu;

__device__ inline double WarpSum(double v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(kFullWarp, v, offset);
  return v;
}

// One warp per 32-bit word of sign bits, one lane per element (coalesced
// loads): the word is the warp's ballot of OneBitNegative, lane j's bit j.
// Each lane keeps a running |c| sum while the warp's words stay inside one
// segment, and the warp adds it into that segment's double sum when the
// segment changes and at the end; a word that straddles a boundary adds
// each element into its own segment.
__global__ void PackAndSumKernel(const float* c, uint32_t n, const uint32_t* cuts, uint32_t num_cuts,
                                 uint32_t* words, double* sums) {
  const uint32_t lane = threadIdx.x & 31;
  const uint64_t warps = (uint64_t{gridDim.x} * blockDim.x) / 32;
  const uint64_t num_words = (uint64_t{n} + 31) / 32;
  uint32_t run_segment = kNoSegment;
  double run = 0;
  for (uint64_t w = (uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32; w < num_words; w += warps) {
    const uint32_t first = static_cast<uint32_t>(w) * 32, i = first + lane;
    const bool inside = i < n;
    const float v = inside ? c[i] : 0.0f;
    const uint32_t word = __ballot_sync(kFullWarp, inside && element::OneBitNegative(v));
    if (lane == 0) words[w] = word;
    const uint32_t last = n - first < 32 ? n - 1 : first + 31;
    const uint32_t segment = element::OneBitSegmentOf(cuts, num_cuts, first);
    if (segment == element::OneBitSegmentOf(cuts, num_cuts, last)) {  // the whole warp agrees
      if (segment != run_segment) {
        const double total = WarpSum(run);
        if (lane == 0 && run_segment != kNoSegment) atomicAdd(&sums[run_segment], total);
        run_segment = segment;
        run = 0;
      }
      if (inside) run += element::OneBitAbs(v);
    } else if (inside) {
      atomicAdd(&sums[element::OneBitSegmentOf(cuts, num_cuts, i)], element::OneBitAbs(v));
    }
  }
  const double total = WarpSum(run);
  if (lane == 0 && run_segment != kNoSegment) atomicAdd(&sums[run_segment], total);
}

// Few warps, many words each: one atomic per warp and segment run.
inline int PackBlocks(uint32_t n) {
  const int wanted = Blocks(uint64_t{n});
  return wanted < 256 ? wanted : 256;
}

__global__ void ScaleKernel(const double* sums, const uint32_t* cuts, uint32_t num_cuts, uint32_t n,
                            float* scales) {
  BPS_GRID_STRIDE(s, uint64_t{num_cuts} + 1) {
    const uint32_t seg = static_cast<uint32_t>(s);
    const uint32_t lo = element::OneBitSegmentBegin(cuts, seg), hi = element::OneBitSegmentEnd(cuts, num_cuts, seg, n);
    scales[s] = element::OneBitScale(sums[s], hi - lo);
  }
}

// What SignedKernel does with each element's +-scale.
enum class SignedUse { kSubtractFromResidual, kWrite, kAdd };

template <SignedUse use>
__global__ void SignedKernel(const uint8_t* bits, const float* scales, const uint32_t* cuts, uint32_t num_cuts,
                             uint32_t n, float* data) {
  BPS_GRID_STRIDE(i64, n) {
    const uint32_t i = static_cast<uint32_t>(i64);
    const float sent = element::OneBitSigned(bits, i, scales[element::OneBitSegmentOf(cuts, num_cuts, i)]);
    if (use == SignedUse::kSubtractFromResidual) data[i] = element::Leftover(data[i], sent);
    if (use == SignedUse::kWrite) data[i] = sent;
    if (use == SignedUse::kAdd) data[i] += sent;
  }
}

class OneBitDeviceCodec : public DeviceCodec {
 public:
  uint8_t wire_id() const override { return 1; }
  uint64_t ScratchBytes(const CodecHeader& h) const override { return (uint64_t{h.cuts} + 1) * sizeof(double); }

  Status Encode(const CodecHeader& h, const float* c, const uint32_t* cuts, uint64_t key, uint32_t round,
                float* residual, char* body, void* scratch, void* stream_ptr) const override {
    cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
    const uint32_t n = h.count;
    double* sums = static_cast<double*>(scratch);
    float* scales = reinterpret_cast<float*>(body);
    uint32_t* words = reinterpret_cast<uint32_t*>(body + (uint64_t{h.cuts} + 1) * sizeof(float));
    BPS_RETURN_IF_ERROR(
        device_launch::Check(cudaMemsetAsync(sums, 0, ScratchBytes(h), stream), "onebit's segment sums"));
    PackAndSumKernel<<<PackBlocks(n), kThreads, 0, stream>>>(c, n, cuts, h.cuts, words, sums);
    ScaleKernel<<<Blocks(uint64_t{h.cuts} + 1), kThreads, 0, stream>>>(sums, cuts, h.cuts, n, scales);
    if (residual) {
      SignedKernel<SignedUse::kSubtractFromResidual><<<Blocks(n), kThreads, 0, stream>>>(
          reinterpret_cast<const uint8_t*>(words), scales, cuts, h.cuts, n, residual);
    }
    return device_launch::Launched("onebit's encoding kernels");
  }

  Status Decode(const CodecHeader& h, const uint32_t* cuts, const char* body, uint64_t key, uint32_t round,
                float* out, void* scratch, void* stream) const override {
    return ApplySigns<SignedUse::kWrite>(h, cuts, body, out, stream);
  }
  Status DecodeAdd(const CodecHeader& h, const uint32_t* cuts, const char* body, uint64_t key, uint32_t round,
                   float* acc, void* scratch, void* stream) const override {
    return ApplySigns<SignedUse::kAdd>(h, cuts, body, acc, stream);
  }

 private:
  template <SignedUse use>
  static Status ApplySigns(const CodecHeader& h, const uint32_t* cuts, const char* body, float* data, void* stream) {
    const float* scales = reinterpret_cast<const float*>(body);
    const uint8_t* bits = reinterpret_cast<const uint8_t*>(body + (uint64_t{h.cuts} + 1) * sizeof(float));
    SignedKernel<use><<<Blocks(h.count), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(bits, scales, cuts,
                                                                                              h.cuts, h.count, data);
    return device_launch::Launched("onebit's decoding kernel");
  }
};

const OneBitDeviceCodec kOneBitDevice;
const bool registered = RegisterDeviceCodec(&kOneBitDevice);

}  // namespace
}  // namespace bps
