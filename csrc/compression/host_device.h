// BPS_HOST_DEVICE marks the codecs' per-element code (the *_element.h
// headers): __host__ __device__ under nvcc, nothing otherwise. The CUDA
// kernels (*.cu) and the host codecs include the same headers, and
// tests/cpp/codec_agreement_test.cc compiles them for the host, so CI checks
// the very code the GPU runs against the host codecs.
#pragma once

#if defined(__CUDACC__)
#define BPS_HOST_DEVICE __host__ __device__
#else
#define BPS_HOST_DEVICE
#endif

namespace bps {
namespace element {

// a * b + c rounded twice, as the host computes it: nvcc would otherwise
// contract it into one fused multiply-add (one rounding), and worker momentum
// would drift from the host codec's in the last bit.
BPS_HOST_DEVICE inline float MulAddUnfused(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(__fmul_rn(a, b), c);
#else
  return a * b + c;
#endif
}

}  // namespace element
}  // namespace bps
