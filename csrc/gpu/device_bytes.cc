#include "gpu/device_bytes.h"

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>

#include "gpu/cuda_status.h"

namespace bps {
namespace gpu {
namespace {

// A non-blocking stream per device for copies made on an engine thread: the
// legacy default stream would also wait for every blocking stream's work,
// collectives of later tensors included. Never destroyed (as the engine's).
Status CopyStream(int device, cudaStream_t* out) {
  static std::mutex mu;
  static std::map<int, cudaStream_t> streams;
  std::lock_guard<std::mutex> lock(mu);
  auto found = streams.find(device);
  if (found == streams.end()) {
    cudaStream_t made;
    BPS_CUDA_RETURN(cudaStreamCreateWithFlags(&made, cudaStreamNonBlocking));
    found = streams.emplace(device, made).first;
  }
  *out = found->second;
  return Status::OK();
}

}  // namespace

Status PlaceBytesOnStream(const void* input, int64_t input_bytes, int64_t offset, void* output, int64_t total_bytes,
                          int device, void* stream) {
  DeviceGuard guard(device);
  auto s = static_cast<cudaStream_t>(stream);
  char* out = static_cast<char*>(output);
  const int64_t after = offset + input_bytes;
  if (input_bytes > 0 && input != out + offset) {
    BPS_CUDA_RETURN(cudaMemcpyAsync(out + offset, input, input_bytes, cudaMemcpyDeviceToDevice, s));
  }
  if (offset > 0) BPS_CUDA_RETURN(cudaMemsetAsync(out, 0, offset, s));
  if (total_bytes > after) BPS_CUDA_RETURN(cudaMemsetAsync(out + after, 0, total_bytes - after, s));
  return Status::OK();
}

Status CopyBytesOnStream(void* dst, const void* src, int64_t bytes, int device, void* stream, void** copied) {
  DeviceGuard guard(device);
  auto s = static_cast<cudaStream_t>(stream);
  cudaEvent_t event;
  BPS_CUDA_RETURN(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  Status st = CudaStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
  if (st.ok()) st = CudaStatus(cudaEventRecord(event, s), "cudaEventRecord");
  if (!st.ok()) {
    cudaEventDestroy(event);
    return st;
  }
  *copied = event;
  return Status::OK();
}

Status WaitForCopy(void* copied, int device) {
  DeviceGuard guard(device);
  auto event = static_cast<cudaEvent_t>(copied);
  Status st = CudaStatus(cudaEventSynchronize(event), "cudaEventSynchronize");
  cudaEventDestroy(event);
  return st;
}

Status CopyBytesNow(void* dst, const void* src, int64_t bytes, int device) {
  DeviceGuard guard(device);
  cudaStream_t s = nullptr;
  BPS_RETURN_IF_ERROR(CopyStream(device, &s));
  BPS_CUDA_RETURN(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
  return CudaStatus(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

}  // namespace gpu
}  // namespace bps
