// The sequenced reducer's conformance suite (../sequenced_reducer_conformance.h)
// over real NCCL: 2 to 4 local ranks as threads of this process, rank q on
// cuda:q, one communicator per case. Built and run by scripts/gpu_cpp_tests.sh
// on a GPU machine; CI runs the same cases over the emulation.
#include "cuda_memory.h"
#include "gpu/nccl_collectives.h"
#include "sequenced_reducer_conformance.h"

namespace bps {
namespace testing_support {
namespace {

CollectivesKit Nccl() {
  return CollectivesKit{"nccl", &gpu::MakeNcclLocalReducer,
                        [] { return std::unique_ptr<DeviceMemory>(new CudaMemory()); }, &CudaDeviceCount};
}

INSTANTIATE_TEST_SUITE_P(Nccl, SequencedReducerConformance,
                         ::testing::Values(SequencedCase{Nccl(), 2}, SequencedCase{Nccl(), 3}, SequencedCase{Nccl(), 4}),
                         SequencedCaseName);

}  // namespace
}  // namespace testing_support
}  // namespace bps
