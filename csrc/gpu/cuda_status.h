// CUDA and NCCL results turned into the engine's Status, naming the call that
// failed, so every GPU-path error reads like the CPU path's.
#pragma once
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

#include "common/status.h"

namespace bps {
namespace gpu {

inline Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::OK();
  return Status::Internal(std::string(what) + " failed: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) +
                          ")");
}

inline Status NcclStatus(ncclResult_t res, const char* what) {
  if (res == ncclSuccess) return Status::OK();
  std::string msg = std::string(what) + " failed: " + ncclGetErrorString(res);
  // ncclRemoteError / ncclSystemError: a peer process or the machine broke.
  if (res == ncclRemoteError || res == ncclSystemError) return Status::PeerFailure(msg);
  if (res == ncclInvalidArgument || res == ncclInvalidUsage) return Status::Invalid(msg);
  return Status::Internal(msg);
}

#define BPS_CUDA_RETURN(call) BPS_RETURN_IF_ERROR(::bps::gpu::CudaStatus((call), #call))
#define BPS_NCCL_RETURN(call) BPS_RETURN_IF_ERROR(::bps::gpu::NcclStatus((call), #call))

// Makes `device` current for the scope and restores the caller's device:
// submissions run on framework threads whose current device is theirs.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) cudaSetDevice(device);
  }
  ~DeviceGuard() {
    int now = -1;
    if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace gpu
}  // namespace bps
