// onebit's kernels (device_codec.h), the twin of onebit.cc: one thread per
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

__global__ void PackAndSumKernel(const float* c, uint32_t n, const uint32_t* cuts, uint32_t num_cuts,
                                 uint32_t* words, double* sums) {
  BPS_GRID_STRIDE(w, (uint64_t{n} + 31) / 32) {
    words[w] = element::OneBitSignWord(c, n, static_cast<uint32_t>(w));
    const uint32_t first = static_cast<uint32_t>(w) * 32;
    const uint32_t last = n - first < 32 ? n : first + 32;
    uint32_t s = element::OneBitSegmentOf(cuts, num_cuts, first);
    uint32_t end = element::OneBitSegmentEnd(cuts, num_cuts, s, n);
    double sum = 0;
    for (uint32_t i = first; i < last; ++i) {
      while (i >= end) {  // the word crosses into the next segment
        atomicAdd(&sums[s], sum);
        sum = 0;
        ++s;
        end = element::OneBitSegmentEnd(cuts, num_cuts, s, n);
      }
      sum += element::OneBitAbs(c[i]);
    }
    atomicAdd(&sums[s], sum);
  }
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
    PackAndSumKernel<<<Blocks((uint64_t{n} + 31) / 32), kThreads, 0, stream>>>(c, n, cuts, h.cuts, words, sums);
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
