// The codecs on device memory (issue 39): the twins of Compress, Decompress
// and DecompressAdd (compressor.h) for a slice that lives on a GPU, queued on
// a CUDA stream, writing the same wire format. Each codec's kernels sit in a
// .cu beside its host file (onebit.cu, topk.cu, randomk.cu) and register
// here by wire id, as the host codecs register in codec.h; both compile the
// codec's per-element code from the same header (*_element.h, host_device.h),
// and tests/cpp/compression_agreement_test.cc checks that code against the
// host codecs on every CI run.
//
// The .cu files are compiled only in the CUDA build (setup.py, and
// tests/cpp/CMakeLists.txt with BPS_WITH_CUDA); DeviceCompress and its
// siblings (device_codec.cu) exist only there, so a caller sits under
// BPS_WITH_CUDA. FindDeviceCodec exists in every build and answers null
// without CUDA. The engine's device reducer calls them for a GPU tensor's
// compressed pushes (csrc/gpu/slice_compression.*).
//
// Agreement with the host codec, for the same input and state: onebit's sign
// bits, topk's indices and values, randomk's indices and values, and the
// error-feedback residual of topk and randomk, exactly; onebit's scales to
// float32 rounding (the double-precision sum runs in another order), and its
// residual through them. Pointers are device pointers, 4-byte aligned (a
// payload's header is 16 bytes and its fields 4); `stream` is a
// cudaStream_t (void* here so the header needs no CUDA).
#pragma once
#include <cstdint>

#include "common/status.h"
#include "compression/compressor.h"

namespace bps {

// SliceState's twin, every pointer in device memory; null: none.
struct DeviceSliceState {
  float* residual = nullptr;
  float* momentum = nullptr;
  float mu = 0;
  bool nesterov = true;
  const uint32_t* cuts = nullptr;  // CodecHeader::cuts of them
};

class DeviceCodec {
 public:
  virtual ~DeviceCodec() = default;
  virtual uint8_t wire_id() const = 0;  // Codec::wire_id of its host twin
  // Device scratch bytes that Encode, Decode and DecodeAdd need for a slice of h.
  virtual uint64_t ScratchBytes(const CodecHeader& h) const = 0;
  // As Codec::Encode: body = compress(c), and residual (which holds c when
  // non-null) becomes c - decompress(body).
  virtual Status Encode(const CodecHeader& h, const float* c, const uint32_t* cuts, uint64_t key, uint32_t round,
                        float* residual, char* body, void* scratch, void* stream) const = 0;
  // out = decompress(body) (sparse codecs: SparseDeviceCodec, device_launch.h).
  virtual Status Decode(const CodecHeader& h, const uint32_t* cuts, const char* body, uint64_t key, uint32_t round,
                        float* out, void* scratch, void* stream) const = 0;
  virtual Status DecodeAdd(const CodecHeader& h, const uint32_t* cuts, const char* body, uint64_t key,
                           uint32_t round, float* acc, void* scratch, void* stream) const = 0;
};

// As RegisterCodec (codec.h): for the life of the process, unique wire ids.
bool RegisterDeviceCodec(const DeviceCodec* codec);
// Null when the codec has no kernels, or the build has no CUDA.
const DeviceCodec* FindDeviceCodec(uint8_t wire_id);

// CUDA build only (device_codec.cu). Device scratch for a slice of h,
// its codec's and the momentum's.
uint64_t DeviceScratchBytes(const CodecHeader& h);
// Compress (compressor.h) on the device: `out` receives CompressedBytes(h)
// bytes, header and segment boundaries included; the state's momentum and
// residual are updated as the host's are.
Status DeviceCompress(const CodecHeader& h, const float* x, const DeviceSliceState& state, uint64_t key,
                      uint32_t round, char* out, void* scratch, void* stream);
// Decompress / DecompressAdd on the device. The header is the host's copy
// (the caller knows the codec it agreed); `in` is the whole payload.
Status DeviceDecompress(const CodecHeader& h, const char* in, uint64_t key, uint32_t round, float* out,
                        void* scratch, void* stream);
Status DeviceDecompressAdd(const CodecHeader& h, const char* in, uint64_t key, uint32_t round, float* acc,
                           void* scratch, void* stream);

}  // namespace bps
