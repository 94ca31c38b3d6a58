// topk's kernels (device_codec.h), the twin of topk.cc: the radix select of
// topk_element.h with device histograms (every pass over the whole slice,
// counting the keys that match the digits found so far), one thread picking
// each pass's bin, then the tie rule through prefix sums: an element whose
// key equals the threshold is taken when fewer than `equal_taken` such
// elements precede it, and the chosen elements' output positions are the
// prefix sum of their flags, so the indices come out ascending.
#include <cuda_runtime.h>

#include "compression/device_codec.h"
#include "compression/device_launch.h"
#include "compression/topk_element.h"

namespace bps {
namespace {

using device_launch::Blocks;
using device_launch::kThreads;

struct SelectState {
  uint32_t prefix;  // the digits found so far; after the last pass, the threshold key
  uint32_t wanted;  // how many of the k remain among the keys matching prefix
};

__global__ void StartKernel(SelectState* state, uint32_t k) {
  state->prefix = 0;
  state->wanted = k;
}

__global__ void HistogramKernel(const float* c, uint32_t n, int pass, const SelectState* state, uint32_t* histogram) {
  __shared__ uint32_t local[element::kTopKMaxBins];
  const uint32_t bins = element::TopKDigitBins(pass);
  for (uint32_t b = threadIdx.x; b < bins; b += blockDim.x) local[b] = 0;
  __syncthreads();
  const uint32_t prefix = state->prefix;
  BPS_GRID_STRIDE(i, n) {
    const uint32_t key = element::TopKKey(c[i]);
    if (element::TopKMatchesPrefix(key, prefix, pass)) atomicAdd(&local[element::TopKDigit(key, pass)], 1u);
  }
  __syncthreads();
  for (uint32_t b = threadIdx.x; b < bins; b += blockDim.x) {
    if (local[b]) atomicAdd(&histogram[b], local[b]);
  }
}

__global__ void PickBinKernel(const uint32_t* histogram, int pass, SelectState* state) {
  uint32_t bin = 0, above = 0;
  element::TopKPickBin(histogram, element::TopKDigitBins(pass), state->wanted, &bin, &above);
  state->wanted -= above;
  state->prefix |= bin << element::TopKDigitShift(pass);
}

__global__ void EqualFlagsKernel(const float* c, uint32_t n, const SelectState* state, uint32_t* equal) {
  const uint32_t threshold = state->prefix;
  BPS_GRID_STRIDE(i, n) { equal[i] = element::TopKKey(c[i]) == threshold; }
}

// equal_rank holds, per element, how many earlier elements equal the
// threshold; it becomes the chosen flags, in place.
__global__ void ChosenFlagsKernel(const float* c, uint32_t n, const SelectState* state, uint32_t* rank_then_flag) {
  const uint32_t threshold = state->prefix, equal_taken = state->wanted;
  BPS_GRID_STRIDE(i, n) {
    rank_then_flag[i] = element::TopKChosen(element::TopKKey(c[i]), threshold, rank_then_flag[i], equal_taken);
  }
}

__global__ void WriteChosenKernel(const float* c, uint32_t n, const uint32_t* flags, const uint32_t* positions,
                                  uint32_t* indices, float* values) {
  BPS_GRID_STRIDE(i, n) {
    if (!flags[i]) continue;
    const uint32_t at = positions[i];
    indices[at] = static_cast<uint32_t>(i);
    values[at] = c[i];
  }
}

// After WriteChosenKernel: the residual of what was sent exactly is zero.
__global__ void ClearSentKernel(const uint32_t* indices, uint32_t k, float* residual) {
  BPS_GRID_STRIDE(j, k) { residual[indices[j]] = 0.0f; }
}

__global__ void ScatterKernel(const uint32_t* indices, const float* values, uint32_t k, float* data) {
  BPS_GRID_STRIDE(j, k) { data[indices[j]] += values[j]; }  // distinct indices: no two threads meet
}

class TopKDeviceCodec : public SparseDeviceCodec {
 public:
  uint8_t wire_id() const override { return 2; }

  uint64_t ScratchBytes(const CodecHeader& h) const override {
    const uint64_t per_element = device_launch::Align(uint64_t{h.count} * sizeof(uint32_t));
    return device_launch::Align(sizeof(SelectState)) +
           device_launch::Align(element::kTopKMaxBins * sizeof(uint32_t)) + 3 * per_element +
           device_launch::ScanScratchBytes(h.count);
  }

  Status Encode(const CodecHeader& h, const float* c, const uint32_t* cuts, uint64_t key, uint32_t round,
                float* residual, char* body, void* scratch, void* stream_ptr) const override {
    cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
    const uint32_t n = h.count;
    device_launch::ScratchCursor take(scratch);
    SelectState* state = take.Take<SelectState>(1);
    uint32_t* histogram = take.Take<uint32_t>(element::kTopKMaxBins);
    uint32_t* equal = take.Take<uint32_t>(n);
    uint32_t* flags = take.Take<uint32_t>(n);
    uint32_t* positions = take.Take<uint32_t>(n);
    void* scan_scratch = take.Take<char>(device_launch::ScanScratchBytes(n));
    uint32_t* indices = reinterpret_cast<uint32_t*>(body);
    float* values = reinterpret_cast<float*>(body + uint64_t{h.k} * sizeof(uint32_t));

    StartKernel<<<1, 1, 0, stream>>>(state, h.k);
    for (int pass = 0; pass < element::kTopKPasses; ++pass) {
      BPS_RETURN_IF_ERROR(device_launch::Check(
          cudaMemsetAsync(histogram, 0, element::kTopKMaxBins * sizeof(uint32_t), stream), "topk's histogram"));
      HistogramKernel<<<Blocks(n), kThreads, 0, stream>>>(c, n, pass, state, histogram);
      PickBinKernel<<<1, 1, 0, stream>>>(histogram, pass, state);
    }
    EqualFlagsKernel<<<Blocks(n), kThreads, 0, stream>>>(c, n, state, equal);
    BPS_RETURN_IF_ERROR(device_launch::Launched("topk's selection kernels"));
    BPS_RETURN_IF_ERROR(device_launch::ExclusiveSum(equal, flags, n, scan_scratch, stream));
    ChosenFlagsKernel<<<Blocks(n), kThreads, 0, stream>>>(c, n, state, flags);
    BPS_RETURN_IF_ERROR(device_launch::Launched("topk's tie kernel"));
    BPS_RETURN_IF_ERROR(device_launch::ExclusiveSum(flags, positions, n, scan_scratch, stream));
    WriteChosenKernel<<<Blocks(n), kThreads, 0, stream>>>(c, n, flags, positions, indices, values);
    if (residual) ClearSentKernel<<<Blocks(h.k), kThreads, 0, stream>>>(indices, h.k, residual);
    return device_launch::Launched("topk's output kernels");
  }

  Status DecodeAdd(const CodecHeader& h, const uint32_t* cuts, const char* body, uint64_t key, uint32_t round,
                   float* acc, void* scratch, void* stream) const override {
    const uint32_t* indices = reinterpret_cast<const uint32_t*>(body);
    const float* values = reinterpret_cast<const float*>(body + uint64_t{h.k} * sizeof(uint32_t));
    ScatterKernel<<<Blocks(h.k), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(indices, values, h.k, acc);
    return device_launch::Launched("topk's decoding kernel");
  }
};

const TopKDeviceCodec kTopKDevice;
const bool registered = RegisterDeviceCodec(&kTopKDevice);

}  // namespace
}  // namespace bps
