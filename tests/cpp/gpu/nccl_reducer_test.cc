// The sequenced reducer's conformance suite (../sequenced_reducer_conformance.h)
// over real NCCL: 1 to 4 local ranks as threads of this process, rank q on
// cuda:q, one communicator per case. Built and run by scripts/gpu_cpp_tests.sh
// on a GPU machine; CI runs the same cases over the emulation.
#include "cuda_memory.h"
#include "gpu/nccl_collectives.h"
#include "sequenced_reducer_conformance.h"

namespace bps {
namespace testing_support {
namespace {

// Whether `device` finishes all its work within `seconds`: a kernel left
// spinning for a dead peer never does (the waiting thread is then abandoned).
bool DeviceIdle(int device, double seconds) {
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread([device, done] {
    cudaSetDevice(device);
    cudaDeviceSynchronize();
    *done = true;
  }).detach();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!*done && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return *done;
}

CollectivesKit Nccl() {
  return CollectivesKit{"nccl", &gpu::MakeNcclLocalReducer,
                        [] { return std::unique_ptr<DeviceMemory>(new CudaMemory()); }, &CudaDeviceCount, &DeviceIdle};
}

INSTANTIATE_TEST_SUITE_P(Nccl, SequencedReducerConformance,
                         ::testing::Values(SequencedCase{Nccl(), 1}, SequencedCase{Nccl(), 2}, SequencedCase{Nccl(), 3}, SequencedCase{Nccl(), 4}),
                         SequencedCaseName);

}  // namespace
}  // namespace testing_support
}  // namespace bps
