// The whole-payload device entries of device_codec.h: the codec header and
// segment boundaries, worker momentum and error feedback's input (the
// per-element code of error_feedback_element.h), then the codec's kernels
// (FindDeviceCodec).
#include <cuda_runtime.h>

#include <cstring>

#include "compression/device_codec.h"
#include "compression/device_launch.h"
#include "compression/error_feedback_element.h"

namespace bps {
namespace {

using device_launch::Blocks;
using device_launch::kThreads;

struct HeaderWords {
  uint32_t w[4];
};

// The header's four words, then the boundaries: a payload is 4-byte aligned.
__global__ void WriteHeaderKernel(HeaderWords header, const uint32_t* cuts, uint32_t num_cuts, uint32_t* out) {
  BPS_GRID_STRIDE(i, 4 + uint64_t{num_cuts}) { out[i] = i < 4 ? header.w[i] : cuts[i - 4]; }
}

// m = mu m + x; c = x + mu m (nesterov, into `stepped`) or m; then with
// error feedback residual = residual + c. What the codec compresses is then
// residual, else stepped, else m, else x (CompressorInput).
__global__ void PrepareKernel(const float* x, float* momentum, float mu, bool nesterov, float* stepped,
                              float* residual, uint32_t n) {
  BPS_GRID_STRIDE(i, n) {
    float p = x[i];
    if (momentum) {
      const float m = element::MomentumUpdate(momentum[i], p, mu);
      momentum[i] = m;
      p = element::MomentumStepped(p, m, mu, nesterov);
      if (nesterov && !residual) stepped[i] = p;
    }
    if (residual) residual[i] = element::Corrected(residual[i], p);
  }
}

const DeviceCodec* CodecOf(const CodecHeader& h, Status* status) {
  const DeviceCodec* codec = FindDeviceCodec(h.kind);
  if (!codec) *status = Status::Invalid("no device kernels for " + DescribeCodec(h));
  return codec;
}

uint64_t SteppedBytes(const CodecHeader& h) { return device_launch::Align(uint64_t{h.count} * sizeof(float)); }

}  // namespace

uint64_t DeviceScratchBytes(const CodecHeader& h) {
  const DeviceCodec* codec = FindDeviceCodec(h.kind);
  return SteppedBytes(h) + (codec ? device_launch::Align(codec->ScratchBytes(h)) : 0);
}

Status DeviceCompress(const CodecHeader& h, const float* x, const DeviceSliceState& state, uint64_t key,
                      uint32_t round, char* out, void* scratch, void* stream_ptr) {
  Status status;
  const DeviceCodec* codec = CodecOf(h, &status);
  if (!codec) return status;
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  const uint32_t n = h.count;
  float* stepped = static_cast<float*>(scratch);
  void* codec_scratch = static_cast<char*>(scratch) + SteppedBytes(h);
  HeaderWords words;
  static_assert(sizeof(words) == sizeof(CodecHeader), "the header is four words");
  memcpy(&words, &h, sizeof(h));
  WriteHeaderKernel<<<Blocks(4 + uint64_t{h.cuts}), kThreads, 0, stream>>>(words, state.cuts, h.cuts,
                                                                            reinterpret_cast<uint32_t*>(out));
  const float* c = x;
  if (state.momentum || state.residual) {
    PrepareKernel<<<Blocks(n), kThreads, 0, stream>>>(x, state.momentum, state.mu, state.nesterov, stepped,
                                                      state.residual, n);
    c = state.residual ? state.residual : state.nesterov && state.momentum ? stepped : state.momentum;
  }
  BPS_RETURN_IF_ERROR(device_launch::Launched("compression's header and momentum kernels"));
  char* body = out + sizeof(CodecHeader) + uint64_t{h.cuts} * sizeof(uint32_t);
  return codec->Encode(h, c, state.cuts, key, round, state.residual, body, codec_scratch, stream_ptr);
}

namespace {

// A payload's parts (its header is `h`): onebit's cuts, then the codec's body.
struct PayloadParts {
  const uint32_t* cuts;
  const char* body;
};
PayloadParts PartsOf(const CodecHeader& h, const char* in) {
  return {reinterpret_cast<const uint32_t*>(in + sizeof(CodecHeader)),
          in + sizeof(CodecHeader) + uint64_t{h.cuts} * sizeof(uint32_t)};
}

}  // namespace

Status DeviceDecompress(const CodecHeader& h, const char* in, uint64_t key, uint32_t round, float* out,
                        void* scratch, void* stream) {
  Status status;
  const DeviceCodec* codec = CodecOf(h, &status);
  if (!codec) return status;
  const PayloadParts p = PartsOf(h, in);
  return codec->Decode(h, p.cuts, p.body, key, round, out, static_cast<char*>(scratch) + SteppedBytes(h), stream);
}

Status DeviceDecompressAdd(const CodecHeader& h, const char* in, uint64_t key, uint32_t round, float* acc,
                           void* scratch, void* stream) {
  Status status;
  const DeviceCodec* codec = CodecOf(h, &status);
  if (!codec) return status;
  const PayloadParts p = PartsOf(h, in);
  return codec->DecodeAdd(h, p.cuts, p.body, key, round, acc, static_cast<char*>(scratch) + SteppedBytes(h), stream);
}

}  // namespace bps
