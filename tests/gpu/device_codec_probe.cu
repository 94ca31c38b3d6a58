// A small C entry to the device codecs (csrc/compression/device_codec.h) and
// their host twins, for tests/gpu/test_gpu_compression.py through ctypes: the
// engine does not call the device codecs yet, and its library exports only
// the C ABI. The test compiles this file with the codecs' sources (nvcc) and
// compares what both sides write, byte by byte.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "compression/compressor.h"
#include "compression/device_codec.h"

namespace {

void Fail(char* error, int error_len, const std::string& what) { snprintf(error, error_len, "%s", what.c_str()); }

// Device copies that free themselves.
template <typename T>
struct DeviceArray {
  T* p = nullptr;
  explicit DeviceArray(size_t count, const T* from = nullptr) {
    if (cudaMalloc(&p, count * sizeof(T) + 16) != cudaSuccess) p = nullptr;
    if (p && from) cudaMemcpy(p, from, count * sizeof(T), cudaMemcpyHostToDevice);
  }
  ~DeviceArray() { cudaFree(p); }
};

bool Parse(const char* spec_text, uint32_t n, uint32_t num_cuts, bps::CodecHeader* h, bps::CompressionSpec* spec,
           char* error, int error_len) {
  bps::Status st = bps::ParseCompressionSpec(spec_text, spec);
  if (!st.ok() || !spec->enabled()) {
    Fail(error, error_len, st.ok() ? "no compressor in the spec" : st.message());
    return false;
  }
  *h = bps::MakeCodecHeader(*spec, n, num_cuts);
  return true;
}

}  // namespace

extern "C" {

// The payload's size for (spec, n, cuts): the caller's buffers hold that.
__attribute__((visibility("default"))) long long bps_probe_payload_bytes(const char* spec_text, uint32_t n,
                                                                         uint32_t num_cuts) {
  bps::CompressionSpec spec;
  bps::CodecHeader h;
  char error[256];
  if (!Parse(spec_text, n, num_cuts, &h, &spec, error, sizeof(error))) return -1;
  return static_cast<long long>(bps::CompressedBytes(h));
}

// Compresses x (one step, from the given residual and momentum) on the host
// and on the device: payloads into host_out / device_out, the states after
// into the *_residual / *_momentum arrays (each n floats; momentum ignored
// unless the spec has it). Returns 0, else non-zero with `error` set.
__attribute__((visibility("default"))) int bps_probe_compress(
    const char* spec_text, const float* x, uint32_t n, const uint32_t* cuts, uint32_t num_cuts, uint64_t key,
    uint32_t round, const float* residual_in, const float* momentum_in, char* host_out, char* device_out,
    float* host_residual, float* device_residual, float* host_momentum, float* device_momentum, char* error,
    int error_len) {
  bps::CompressionSpec spec;
  bps::CodecHeader h;
  if (!Parse(spec_text, n, num_cuts, &h, &spec, error, error_len)) return 1;
  const uint64_t bytes = bps::CompressedBytes(h);
  const bool momentum = spec.momentum > 0;

  memcpy(host_residual, residual_in, n * sizeof(float));
  memcpy(host_momentum, momentum_in, n * sizeof(float));
  bps::SliceState state;
  state.residual = spec.error_feedback ? host_residual : nullptr;
  state.momentum = momentum ? host_momentum : nullptr;
  state.mu = static_cast<float>(spec.momentum);
  state.nesterov = spec.nesterov;
  state.cuts = cuts;
  bps::Compress(h, x, state, key, round, host_out);

  DeviceArray<float> d_x(n, x), d_residual(n, residual_in), d_momentum(n, momentum_in);
  DeviceArray<uint32_t> d_cuts(num_cuts, cuts);
  DeviceArray<char> d_out(bytes), d_scratch(bps::DeviceScratchBytes(h));
  if (!d_x.p || !d_residual.p || !d_momentum.p || !d_cuts.p || !d_out.p || !d_scratch.p) {
    Fail(error, error_len, "cudaMalloc failed");
    return 2;
  }
  bps::DeviceSliceState d_state;
  d_state.residual = spec.error_feedback ? d_residual.p : nullptr;
  d_state.momentum = momentum ? d_momentum.p : nullptr;
  d_state.mu = state.mu;
  d_state.nesterov = spec.nesterov;
  d_state.cuts = d_cuts.p;
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  bps::Status st = bps::DeviceCompress(h, d_x.p, d_state, key, round, d_out.p, d_scratch.p, stream);
  cudaError_t synced = cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  if (!st.ok() || synced != cudaSuccess) {
    Fail(error, error_len, st.ok() ? cudaGetErrorString(synced) : st.message());
    return 3;
  }
  cudaMemcpy(device_out, d_out.p, bytes, cudaMemcpyDeviceToHost);
  cudaMemcpy(device_residual, d_residual.p, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(device_momentum, d_momentum.p, n * sizeof(float), cudaMemcpyDeviceToHost);
  return 0;
}

// Decodes one payload on the host and on the device: out = decompress(in),
// then acc (from acc_in) += decompress(in). Each output holds count floats.
__attribute__((visibility("default"))) int bps_probe_decompress(const char* payload, uint64_t payload_bytes,
                                                                uint64_t key, uint32_t round, const float* acc_in,
                                                                float* host_out, float* device_out, float* host_acc,
                                                                float* device_acc, char* error, int error_len) {
  const std::string problem = bps::ValidateCompressed(payload, payload_bytes);
  if (!problem.empty()) {
    Fail(error, error_len, problem);
    return 1;
  }
  bps::CodecHeader h;
  memcpy(&h, payload, sizeof(h));
  const uint32_t n = h.count;
  bps::Decompress(payload, key, round, host_out);
  memcpy(host_acc, acc_in, n * sizeof(float));
  bps::DecompressAdd(payload, key, round, host_acc);

  DeviceArray<char> d_in(payload_bytes, payload), d_scratch(bps::DeviceScratchBytes(h));
  DeviceArray<float> d_out(n), d_acc(n, acc_in);
  if (!d_in.p || !d_scratch.p || !d_out.p || !d_acc.p) {
    Fail(error, error_len, "cudaMalloc failed");
    return 2;
  }
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  bps::Status st = bps::DeviceDecompress(h, d_in.p, key, round, d_out.p, d_scratch.p, stream);
  if (st.ok()) st = bps::DeviceDecompressAdd(h, d_in.p, key, round, d_acc.p, d_scratch.p, stream);
  cudaError_t synced = cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  if (!st.ok() || synced != cudaSuccess) {
    Fail(error, error_len, st.ok() ? cudaGetErrorString(synced) : st.message());
    return 3;
  }
  cudaMemcpy(device_out, d_out.p, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(device_acc, d_acc.p, n * sizeof(float), cudaMemcpyDeviceToHost);
  return 0;
}

}  // extern "C"
