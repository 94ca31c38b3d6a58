// randomk's kernels (device_codec.h), the twin of randomk.cc: the indices in
// the parallel form of Floyd's sampling (randomk_element.h): each of the k
// draws records itself as the first draw of its value (atomicMin), each
// element decides whether it is chosen, and a prefix sum of those flags puts
// the indices in ascending order, as the host's sorted list.
#include <cuda_runtime.h>

#include "compression/device_codec.h"
#include "compression/device_launch.h"
#include "compression/randomk_element.h"

namespace bps {
namespace {

using device_launch::Blocks;
using device_launch::kThreads;

__global__ void FirstDrawKernel(uint64_t start, uint32_t n, uint32_t k, uint32_t* first) {
  BPS_GRID_STRIDE(d, k) {
    const uint32_t j = n - k + static_cast<uint32_t>(d);
    atomicMin(&first[element::RandomKDraw(start, n, k, j)], j);
  }
}

__global__ void ChosenFlagsKernel(uint64_t start, uint32_t n, uint32_t k, const uint32_t* first, uint32_t* flags) {
  BPS_GRID_STRIDE(v, n) { flags[v] = element::RandomKChosen(start, n, k, first, static_cast<uint32_t>(v)); }
}

__global__ void WriteIndicesKernel(uint32_t n, const uint32_t* flags, const uint32_t* positions, uint32_t* indices) {
  BPS_GRID_STRIDE(v, n) {
    if (flags[v]) indices[positions[v]] = static_cast<uint32_t>(v);
  }
}

__global__ void GatherKernel(const float* c, const uint32_t* indices, uint32_t k, float* values) {
  BPS_GRID_STRIDE(j, k) { values[j] = c[indices[j]]; }
}

// After GatherKernel: the residual of what was sent exactly is zero.
__global__ void ClearSentKernel(const uint32_t* indices, uint32_t k, float* residual) {
  BPS_GRID_STRIDE(j, k) { residual[indices[j]] = 0.0f; }
}

__global__ void ScatterKernel(const uint32_t* indices, const float* values, uint32_t k, float* data) {
  BPS_GRID_STRIDE(j, k) { data[indices[j]] += values[j]; }  // distinct indices: no two threads meet
}

class RandomKDeviceCodec : public SparseDeviceCodec {
 public:
  uint8_t wire_id() const override { return 3; }

  uint64_t ScratchBytes(const CodecHeader& h) const override {
    return 3 * device_launch::Align(uint64_t{h.count} * sizeof(uint32_t)) +
           device_launch::Align(uint64_t{h.k} * sizeof(uint32_t)) + device_launch::ScanScratchBytes(h.count);
  }

  Status Encode(const CodecHeader& h, const float* c, const uint32_t* cuts, uint64_t key, uint32_t round,
                float* residual, char* body, void* scratch, void* stream_ptr) const override {
    const uint32_t* indices = nullptr;
    BPS_RETURN_IF_ERROR(Indices(h, key, round, scratch, stream_ptr, &indices));
    cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
    GatherKernel<<<Blocks(h.k), kThreads, 0, stream>>>(c, indices, h.k, reinterpret_cast<float*>(body));
    if (residual) ClearSentKernel<<<Blocks(h.k), kThreads, 0, stream>>>(indices, h.k, residual);
    return device_launch::Launched("randomk's encoding kernels");
  }

  Status DecodeAdd(const CodecHeader& h, const uint32_t* cuts, const char* body, uint64_t key, uint32_t round,
                   float* acc, void* scratch, void* stream) const override {
    const uint32_t* indices = nullptr;
    BPS_RETURN_IF_ERROR(Indices(h, key, round, scratch, stream, &indices));
    ScatterKernel<<<Blocks(h.k), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        indices, reinterpret_cast<const float*>(body), h.k, acc);
    return device_launch::Launched("randomk's decoding kernel");
  }

 private:
  // The k indices of (seed, key, round), ascending, in scratch.
  Status Indices(const CodecHeader& h, uint64_t key, uint32_t round, void* scratch, void* stream_ptr,
                 const uint32_t** out) const {
    cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
    const uint32_t n = h.count, k = h.k;
    device_launch::ScratchCursor take(scratch);
    uint32_t* first = take.Take<uint32_t>(n);
    uint32_t* flags = take.Take<uint32_t>(n);
    uint32_t* positions = take.Take<uint32_t>(n);
    uint32_t* indices = take.Take<uint32_t>(k);
    void* scan_scratch = take.Take<char>(device_launch::ScanScratchBytes(n));
    const uint64_t start = element::RandomKStreamStart(h.seed, key, round);
    BPS_RETURN_IF_ERROR(device_launch::Check(cudaMemsetAsync(first, 0xff, uint64_t{n} * sizeof(uint32_t), stream),
                                             "randomk's first draws"));  // every word element::kNoDraw
    FirstDrawKernel<<<Blocks(k), kThreads, 0, stream>>>(start, n, k, first);
    ChosenFlagsKernel<<<Blocks(n), kThreads, 0, stream>>>(start, n, k, first, flags);
    BPS_RETURN_IF_ERROR(device_launch::Launched("randomk's index kernels"));
    BPS_RETURN_IF_ERROR(device_launch::ExclusiveSum(flags, positions, n, scan_scratch, stream));
    WriteIndicesKernel<<<Blocks(n), kThreads, 0, stream>>>(n, flags, positions, indices);
    *out = indices;
    return device_launch::Launched("randomk's index kernels");
  }
};

const RandomKDeviceCodec kRandomKDevice;
const bool registered = RegisterDeviceCodec(&kRandomKDevice);

}  // namespace
}  // namespace bps
