// Per-element code of error feedback and worker momentum, shared by the host
// codecs (compressor.cc) and the CUDA kernels (*.cu): see host_device.h.
//   momentum:       m = mu m + x; the slice compressed is x + mu m (nesterov) or m
//   error feedback: c = residual + x' before the codec; residual = c - sent after
#pragma once
#include "compression/host_device.h"

namespace bps {
namespace element {

BPS_HOST_DEVICE inline float MomentumUpdate(float m, float x, float mu) { return MulAddUnfused(mu, m, x); }
// What the compressor sees of x after the momentum update gave m.
BPS_HOST_DEVICE inline float MomentumStepped(float x, float m, float mu, bool nesterov) {
  return nesterov ? MulAddUnfused(mu, m, x) : m;
}
// acc += x, in the order AddInto adds (residual first: float addition commutes exactly).
BPS_HOST_DEVICE inline float Corrected(float residual, float x) { return residual + x; }
BPS_HOST_DEVICE inline float Leftover(float corrected, float sent) { return corrected - sent; }

}  // namespace element
}  // namespace bps
