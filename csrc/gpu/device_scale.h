// The average's division on the GPU, for a machine of one GPU: with one local
// rank there is no collective to pre-multiply in (NCCL's one-rank collectives
// with an average left the last element of odd sizes unwritten), and the
// division on the host cost the engine thread 0.7 ms per 3.7 MB partition,
// during which it pushed nothing (issue 26: 2 x 1 BERT-large spent 270 ms of
// each step there). A plain C interface: the kernels are compiled by nvcc,
// the rest of the engine by the host compiler.
#pragma once
#include <cstdint>

extern "C" {
// dtype: 0 float32, 1 float16, 2 bfloat16. data[i] /= divisor (in float32,
// rounded back to the element type), queued on `stream`. Returns the
// cudaError_t of the launch.
int bps_divide_on_device(void* data, int64_t count, int dtype, int64_t divisor, void* stream);
}
