// Byte moves in device memory for the engine's placed sums
// (core/placed_sum.cc): the placement of a gather and the kept range of a
// reduce-scatter, queued on the caller's stream like the sums themselves.
#pragma once
#include <cstdint>

#include "common/status.h"

namespace bps {
namespace gpu {

// Queues on `stream`: output[offset, offset + input_bytes) = input, the rest
// of the total_bytes zero. `input` is that very slot (nothing to copy) or
// memory apart from `output`.
Status PlaceBytesOnStream(const void* input, int64_t input_bytes, int64_t offset, void* output, int64_t total_bytes,
                          int device, void* stream);

// Queues a copy of `bytes` on `stream` and an event after it (*copied, made
// here); WaitForCopy waits for that event and destroys it.
Status CopyBytesOnStream(void* dst, const void* src, int64_t bytes, int device, void* stream, void** copied);
Status WaitForCopy(void* copied, int device);

// Copies `bytes` device to device before returning.
Status CopyBytesNow(void* dst, const void* src, int64_t bytes, int device);

}  // namespace gpu
}  // namespace bps
