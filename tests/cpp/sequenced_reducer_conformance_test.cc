// The sequenced reducer's conformance suite (sequenced_reducer_conformance.h)
// over the emulated collectives, in CI; gpu/nccl_reducer_test.cc runs the same
// cases over NCCL on a GPU machine.
#include "emulated_collectives.h"
#include "sequenced_reducer_conformance.h"

namespace bps {
namespace testing_support {
namespace {

CollectivesKit Emulated() {
  return CollectivesKit{"emulated", &MakeEmulatedDeviceReducer,
                        [] { return std::unique_ptr<DeviceMemory>(new HostAsDeviceMemory()); }, [] { return 64; },
                        [](int, double) { return true; }};  // no device: its tickets end with the abort
}

INSTANTIATE_TEST_SUITE_P(Emulated, SequencedReducerConformance,
                         ::testing::Values(SequencedCase{Emulated(), 1}, SequencedCase{Emulated(), 2}, SequencedCase{Emulated(), 3},
                                           SequencedCase{Emulated(), 4}),
                         SequencedCaseName);

}  // namespace
}  // namespace testing_support
}  // namespace bps
