// The device half of SliceCompression (local/collectives.h, issue 39): a
// GPU slice compressed where it lives, by the device codecs
// (compression/device_codec.h), so only the payload crosses PCIe into
// staging, and the answer is expanded on the device. Per network key, the
// error-feedback residual, the worker momentum, onebit's cuts and the
// payload and answer buffers stay in device memory across rounds (rounds of
// one key never overlap, so one of each suffices).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/status.h"
#include "local/collectives.h"

namespace bps {
namespace gpu {

// Whether the device codecs have `push`'s codec.
bool DeviceCompressesSlices(const CodecHeader& push);

// Queues on `stream`: the payload of `slice` (c->push.count floats) for
// round `round`, then its copy into `staging` (CompressedBytes(c->push)).
Status EncodeSliceIntoStaging(SliceCompression* c, int device, const float* slice, uint32_t round, char* staging,
                              cudaStream_t stream);

// Queues on `stream`: the answer's copy out of `staging`
// (CompressedBytes(c->answer)), then its expansion into `slice`.
Status DecodeStagingIntoSlice(SliceCompression* c, int device, const char* staging, uint32_t round, float* slice,
                              cudaStream_t stream);

// Frees c's device buffers. cudaFree waits for the device (see
// benchmarks/stream_hold_probe.cu), so this runs only when a key's codec
// changes and at shutdown.
void ForgetSliceCompression(SliceCompression* c, int device);

}  // namespace gpu
}  // namespace bps
