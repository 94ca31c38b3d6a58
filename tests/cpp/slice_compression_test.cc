// Compression where the slice lives (issue 39, local/collectives.h's
// SliceCompression): the reducer compresses its reduced slice into staging
// and expands the answer itself, as the device codecs do on a GPU (here the
// emulation runs the host codec in its "device" memory). Every result must be
// bit-identical to the engine compressing the staged slice on the host, round
// after round (error feedback and momentum carry state across rounds), and
// the pushes must be as compressed: the wire and the servers cannot tell the
// two apart, which is what lets CPU and GPU machines share a job.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "completion.h"
#include "emulated_collectives.h"
#include "in_process_job.h"

namespace bps {
namespace {

using testing_support::Completion;
using testing_support::EmulatedCommunicator;
using testing_support::InProcessJob;
using testing_support::JobShape;

struct Outcome {
  std::vector<std::vector<std::vector<float>>> outputs;  // [round][rank]
  bool compressed = true;                                // every rank pushed compressed
  int64_t encoded_on_reducer = 0;                        // slices the reducer compressed
  std::string error;
};

// `host_ranks`: ranks whose tensors are host memory (device -1); the others'
// are "device" tensors through the emulated device reducer.
Outcome RunRounds(const JobShape& shape, const std::string& spec, bool on_reducer, int rounds,
                  std::vector<int> host_ranks = {}, int64_t n = 20000) {
  EmulatedCommunicator::CompressesSlices() = on_reducer;
  const int64_t encoded_before = EmulatedCommunicator::SlicesEncoded();
  Outcome outcome;
  EngineOptions options;
  options.device_reducer = &testing_support::MakeEmulatedDeviceReducer;
  InProcessJob job(shape, options);
  Status st = job.Start();
  if (!st.ok()) {
    outcome.error = st.message();
    return outcome;
  }
  // n = 20000 floats: 80 KB, above BYTEPS_MIN_COMPRESS_BYTES, many partitions.
  for (int r = 0; r < job.size() && !spec.empty(); ++r) {
    st = job.rank(r).DeclareCompression("grads", spec, {});
    if (!st.ok()) outcome.error = st.message();
  }
  for (int round = 0; round < rounds && outcome.error.empty(); ++round) {
    std::vector<std::vector<float>> in(job.size(), std::vector<float>(n)), out(job.size(), std::vector<float>(n));
    std::vector<Completion> done(job.size());
    for (int r = 0; r < job.size(); ++r) {
      // Multiples of 1/64: a server's sum of three machines is exact in any
      // arrival order, so the two runs can be compared bit for bit.
      for (int64_t i = 0; i < n; ++i) {
        in[r][i] = std::round(64 * std::sin(0.37f * static_cast<float>(i % 997) + 1.3f * r + round) * (1 + r)) / 64;
      }
      TensorView t{};
      t.data = in[r].data();
      t.dtype = static_cast<int32_t>(DataType::kFloat32);
      t.num_elements = n;
      t.device = std::count(host_ranks.begin(), host_ranks.end(), r) ? -1 : 0;
      st = job.rank(r).Submit(t, out[r].data(), "grads", 0, ReduceOp::kSum, Completion::Callback, &done[r]);
      if (!st.ok()) Completion::Callback(&done[r], static_cast<int>(st.code()), st.message().c_str());
    }
    for (int r = 0; r < job.size(); ++r) {
      if (!done[r].Wait(30)) {
        outcome.error = "rank " + std::to_string(r) + " hung in round " + std::to_string(round);
      } else if (done[r].code != StatusCode::kOk && outcome.error.empty()) {
        outcome.error = done[r].message;
      }
    }
    outcome.outputs.push_back(std::move(out));
  }
  for (int r = 0; r < job.size(); ++r) {
    if (job.rank(r).StatsJson().find("\"compressed_pushes\": 0,") != std::string::npos) outcome.compressed = false;
  }
  if (spec.empty()) outcome.compressed = false;
  outcome.encoded_on_reducer = EmulatedCommunicator::SlicesEncoded() - encoded_before;
  for (int r = 0; r < job.size(); ++r) {
    const bool counted = job.rank(r).StatsJson().find("\"pushes_compressed_on_reducer\": 0,") == std::string::npos;
    const bool host = std::count(host_ranks.begin(), host_ranks.end(), r) > 0;
    const bool expected = on_reducer && !host && !spec.empty();
    if (counted != expected) outcome.error = "rank " + std::to_string(r) + ": pushes_compressed_on_reducer says " +
                                               (counted ? "some" : "none");
  }
  job.Stop();
  EmulatedCommunicator::CompressesSlices() = false;
  return outcome;
}

struct Case {
  JobShape shape;
  std::string spec;
};

class SliceCompression : public ::testing::TestWithParam<Case> {
 protected:
  void TearDown() override { EmulatedCommunicator::CompressesSlices() = false; }
};

TEST_P(SliceCompression, OnTheReducerEveryResultIsTheHostPathsBitForBit) {
  const Case& c = GetParam();
  Outcome host = RunRounds(c.shape, c.spec, /*on_reducer=*/false, 3);
  ASSERT_TRUE(host.error.empty()) << host.error;
  Outcome reducer = RunRounds(c.shape, c.spec, /*on_reducer=*/true, 3);
  ASSERT_TRUE(reducer.error.empty()) << reducer.error;
  EXPECT_TRUE(host.compressed);
  EXPECT_TRUE(reducer.compressed);
  EXPECT_EQ(host.encoded_on_reducer, 0) << "the host path's run went through the reducer's codec";
  EXPECT_GT(reducer.encoded_on_reducer, 0) << "the reducer never compressed: both runs took the host path";
  ASSERT_EQ(host.outputs.size(), reducer.outputs.size());
  int64_t differing = 0, nonzero = 0;
  for (size_t round = 0; round < host.outputs.size(); ++round) {
    for (size_t r = 0; r < host.outputs[round].size(); ++r) {
      const auto& a = host.outputs[round][r];
      const auto& b = reducer.outputs[round][r];
      for (size_t i = 0; i < a.size(); ++i) {
        if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0 && differing++ == 0) {
          ADD_FAILURE() << c.spec << ": round " << round << " rank " << r << " element " << i << ": host " << a[i]
                        << ", reducer " << b[i];
        }
        nonzero += b[i] != 0.0f;
      }
    }
  }
  EXPECT_EQ(differing, 0);
  EXPECT_GT(nonzero, 0) << "nothing came back: the comparison proves nothing";
}

JobShape Shape(int machines, int local) {
  JobShape s{machines, local, 2};
  s.partition_bytes = 16384;
  return s;
}

INSTANTIATE_TEST_SUITE_P(
    Codecs, SliceCompression,
    ::testing::Values(Case{Shape(2, 1), "onebit"}, Case{Shape(2, 2), "onebit:momentum=0.9"},
                      Case{Shape(2, 1), "topk:ratio=0.05"}, Case{Shape(2, 2), "topk:ratio=0.05,ef=0"},
                      Case{Shape(2, 1), "randomk:ratio=0.05"}, Case{Shape(3, 1), "randomk:ratio=0.1,seed=7"}),
    [](const ::testing::TestParamInfo<Case>& info) {
      std::string name = std::to_string(info.param.shape.machines) + "x" + std::to_string(info.param.shape.local_size) +
                         "_" + info.param.spec;
      for (char& ch : name) {
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return name;
    });

// A CPU machine and a GPU machine in one job: the host tensors of machine 0
// and the device tensors of machine 1 are cut into the same partitions and
// meet at the same keys, uncompressed and compressed (the device machine's
// slices compressed where they live), and every result is the all-host
// job's. A size the device's equal-slice plan cut differently before.
class MixedMachines : public ::testing::TestWithParam<std::string> {
 protected:
  void TearDown() override { EmulatedCommunicator::CompressesSlices() = false; }
};

TEST_P(MixedMachines, AHostMachineAndADeviceMachineGiveTheAllHostJobsResults) {
  const std::string spec = GetParam();
  JobShape shape = Shape(2, 1);
  const int64_t n = 30001;  // 120 KB in 8 partitions of 16 KB: the two plans differ here
  const auto host_plan = PlanPartitions(n, 4, shape.partition_bytes, 1, 2);
  const auto equal_slices = PlanEqualSlicePartitions(n, 4, shape.partition_bytes, 1);
  bool plans_differ = host_plan.size() != equal_slices.size();
  for (size_t i = 0; !plans_differ && i < host_plan.size(); ++i) plans_differ = host_plan[i].count != equal_slices[i].count;
  ASSERT_TRUE(plans_differ) << "the size no longer tells the two plans apart";
  Outcome all_host = RunRounds(shape, spec, false, 3, {0, 1}, n);
  ASSERT_TRUE(all_host.error.empty()) << all_host.error;
  Outcome mixed = RunRounds(shape, spec, /*on_reducer=*/true, 3, {0}, n);
  ASSERT_TRUE(mixed.error.empty()) << mixed.error;
  if (!spec.empty()) EXPECT_GT(mixed.encoded_on_reducer, 0);
  int64_t differing = 0;
  for (size_t round = 0; round < all_host.outputs.size(); ++round) {
    for (size_t r = 0; r < 2; ++r) {
      const auto& a = all_host.outputs[round][r];
      const auto& b = mixed.outputs[round][r];
      for (size_t i = 0; i < a.size(); ++i) {
        if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0 && differing++ == 0) {
          ADD_FAILURE() << "'" << spec << "' round " << round << " rank " << r << " element " << i << ": all-host "
                        << a[i] << ", mixed " << b[i];
        }
      }
    }
  }
  EXPECT_EQ(differing, 0);
}

INSTANTIATE_TEST_SUITE_P(Codecs, MixedMachines,
                         ::testing::Values(std::string(), std::string("onebit"), std::string("topk:ratio=0.05"),
                                           std::string("randomk:ratio=0.05")),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param.empty() ? "uncompressed" : info.param;
                           for (char& ch : name) {
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace bps
