// The engine's gather and reduce-scatter (csrc/core/placed_sum.h) on whole
// in-process jobs, over every transport and reducer: uneven and empty
// contributions, an input that lies inside the output, and bad placements
// refused on every rank with a message that names them.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/placed_sum.h"
#include "in_process_job.h"
#include "test_matrix.h"

namespace bps {
namespace {

using testing_support::Completion;
using testing_support::InProcessJob;
using testing_support::JobShape;

class PlacedSum : public ::testing::TestWithParam<JobShape> {
 protected:
  void SetUp() override {
    job_ = std::make_unique<InProcessJob>(GetParam());
    Status st = job_->Start();
    ASSERT_TRUE(st.ok()) << st.message();
  }
  void TearDown() override { job_->Stop(); }
  std::unique_ptr<InProcessJob> job_;
};

// Rank r's byte i: never 0, different per rank and position.
uint8_t ByteOf(int rank, int64_t i) { return static_cast<uint8_t>(1 + (rank * 31 + i * 7) % 251); }

// Uneven sizes, one rank with nothing, several partitions (4 KB each).
int64_t BytesOf(int rank) { return rank == 1 ? 0 : 3000 + 1001 * rank; }

enum class InputAt { kApart, kOwnSlot, kStartOfOutput };

void GatherOnEveryRank(InProcessJob& job, InputAt where, const std::string& name) {
  const int world = job.size();
  std::vector<int64_t> offsets(world + 1, 0);
  for (int r = 0; r < world; ++r) offsets[r + 1] = offsets[r] + BytesOf(r);
  const int64_t total = offsets[world];
  std::vector<std::vector<uint8_t>> inputs(world), outputs(world);
  std::vector<Completion> done(world);
  for (int r = 0; r < world; ++r) {
    outputs[r].assign(total, 0xAB);  // garbage the gather must overwrite
    std::vector<uint8_t> mine(BytesOf(r));
    for (int64_t i = 0; i < BytesOf(r); ++i) mine[i] = ByteOf(r, i);
    GatherBytes g;
    g.input_bytes = BytesOf(r);
    g.offset = offsets[r];
    g.output = outputs[r].data();
    g.total_bytes = total;
    if (where == InputAt::kApart) {
      inputs[r] = mine;
      g.input = inputs[r].data();
    } else {
      // Inside the output: its own slot, or the start (overlapping the slot
      // of an earlier rank and, for large inputs, its own).
      uint8_t* at = outputs[r].data() + (where == InputAt::kOwnSlot ? offsets[r] : 0);
      std::copy(mine.begin(), mine.end(), at);
      g.input = at;
    }
    Status st = SubmitGatherBytes(job.rank(r), g, name, 0, nullptr, Completion::Callback, &done[r]);
    ASSERT_TRUE(st.ok()) << "rank " << r << ": " << st.message();
  }
  for (int r = 0; r < world; ++r) {
    ASSERT_TRUE(done[r].Wait(30)) << "rank " << r << " never completed";
    ASSERT_EQ(done[r].code, StatusCode::kOk) << done[r].message;
    int64_t wrong = 0, first = -1;
    for (int src = 0; src < world; ++src) {
      for (int64_t i = 0; i < BytesOf(src); ++i) {
        if (outputs[r][offsets[src] + i] != ByteOf(src, i) && wrong++ == 0) first = offsets[src] + i;
      }
    }
    EXPECT_EQ(wrong, 0) << "rank " << r << ": " << wrong << " wrong bytes of " << total << ", first at " << first;
  }
}

TEST_P(PlacedSum, GatherPlacesEveryRanksBytesFromMemoryApart) {
  GatherOnEveryRank(*job_, InputAt::kApart, "gather.apart");
}

TEST_P(PlacedSum, GatherTakesAnInputThatIsItsOwnSlotOfTheOutput) {
  GatherOnEveryRank(*job_, InputAt::kOwnSlot, "gather.own_slot");
}

TEST_P(PlacedSum, GatherTakesAnInputElsewhereInTheOutput) {
  GatherOnEveryRank(*job_, InputAt::kStartOfOutput, "gather.start_of_output");
}

// Rank r's element i: exact in float32, so the kept sums compare exactly.
float ValueOf(int rank, int64_t i) { return static_cast<float>((rank + 1) * (i % 13 + 1)); }

TEST_P(PlacedSum, ReduceScatterLeavesEachRankItsRangeOfTheSum) {
  InProcessJob& job = *job_;
  const int world = job.size();
  // Uneven ranges, rank 1's empty; 5000 floats span several partitions.
  std::vector<int64_t> counts(world), offsets(world + 1, 0);
  for (int r = 0; r < world; ++r) {
    counts[r] = r == 1 ? 0 : 700 + 300 * r;
    offsets[r + 1] = offsets[r] + counts[r];
  }
  const int64_t total = offsets[world] + 500;  // a tail that no rank keeps
  std::vector<std::vector<float>> buffers(world), outputs(world);
  std::vector<Completion> done(world);
  for (int r = 0; r < world; ++r) {
    buffers[r].resize(total);
    for (int64_t i = 0; i < total; ++i) buffers[r][i] = ValueOf(r, i);
    outputs[r].assign(counts[r] + 1, -1.0f);  // one past the range: must stay
    TensorView t{};
    t.data = buffers[r].data();
    t.num_elements = total;
    t.dtype = static_cast<int32_t>(DataType::kFloat32);
    t.device = -1;
    Status st = SubmitReduceScatter(job.rank(r), t, offsets[r], counts[r], outputs[r].data(), "reduce_scatter", 0,
                                    ReduceOp::kSum, nullptr, Completion::Callback, &done[r]);
    ASSERT_TRUE(st.ok()) << "rank " << r << ": " << st.message();
  }
  for (int r = 0; r < world; ++r) {
    ASSERT_TRUE(done[r].Wait(30)) << "rank " << r << " never completed";
    ASSERT_EQ(done[r].code, StatusCode::kOk) << done[r].message;
    int64_t wrong = 0;
    for (int64_t i = 0; i < counts[r]; ++i) {
      float expected = 0;
      for (int src = 0; src < world; ++src) expected += ValueOf(src, offsets[r] + i);
      wrong += outputs[r][i] != expected;
    }
    EXPECT_EQ(wrong, 0) << "rank " << r << ": " << wrong << " wrong of " << counts[r];
    EXPECT_EQ(outputs[r][counts[r]], -1.0f) << "rank " << r << " wrote past its range";
  }
}

TEST_P(PlacedSum, BadPlacementsAreRefusedOnEveryRankNamingThem) {
  InProcessJob& job = *job_;
  const int world = job.size();
  std::vector<uint8_t> input(100, 1), output(150);
  std::vector<float> buffer(40, 1.0f), kept(20);
  for (int r = 0; r < world; ++r) {
    Completion never;
    GatherBytes g;
    g.input = input.data();
    g.input_bytes = 100;
    g.offset = 60;  // 60 + 100 > 150
    g.output = output.data();
    g.total_bytes = 150;
    Status st = SubmitGatherBytes(job.rank(r), g, "bad.gather", 0, nullptr, Completion::Callback, &never);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << "rank " << r;
    EXPECT_NE(st.message().find("gather of 'bad.gather' on rank " + std::to_string(r) +
                                ": this rank's 100 bytes at offset 60 do not fit the 150 gathered bytes"),
              std::string::npos)
        << st.message();
    g.offset = -1;
    st = SubmitGatherBytes(job.rank(r), g, "bad.gather", 0, nullptr, Completion::Callback, &never);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();

    TensorView t{};
    t.data = buffer.data();
    t.num_elements = 40;
    t.dtype = static_cast<int32_t>(DataType::kFloat32);
    t.device = -1;
    st = SubmitReduceScatter(job.rank(r), t, 30, 20, kept.data(), "bad.reduce_scatter", 0, ReduceOp::kSum, nullptr,
                             Completion::Callback, &never);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("this rank's 20 elements at offset 30 do not fit the 40 summed elements"),
              std::string::npos)
        << st.message();
    // The kept range copied into the buffer it came from.
    st = SubmitReduceScatter(job.rank(r), t, 0, 20, buffer.data() + 10, "bad.reduce_scatter", 0, ReduceOp::kSum,
                             nullptr, Completion::Callback, &never);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("the output overlaps the summed buffer"), std::string::npos) << st.message();
    EXPECT_FALSE(never.Wait(0)) << "a refused submission must not complete";
  }
  // Refusals left nothing behind: the engines still gather.
  GatherOnEveryRank(job, InputAt::kApart, "gather.after_refusals");
}

INSTANTIATE_TEST_SUITE_P(Layouts, PlacedSum,
                         ::testing::ValuesIn(testing_support::OverEveryTransportAndReducer(std::vector<JobShape>{
                             JobShape{1, 3, 0},  // one machine: shared memory only
                             JobShape{2, 1, 1},  // two machines, one server
                             JobShape{0, 0, 2, 4096, 20, 8192, {2, 1}}})),  // shared memory and servers
                         testing_support::MatrixCaseName);

}  // namespace
}  // namespace bps
