// The engine's record of every accepted submission (join()'s log) and its
// rule for rounds that fail once a rank joined (csrc/core/join_mark.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/join_mark.h"
#include "core/submission_log.h"
#include "in_process_job.h"

namespace bps {
namespace {

using testing_support::Completion;
using testing_support::InProcessJob;
using testing_support::JobShape;

TEST(SubmissionLog, AnEngineRecordsEachAcceptedOpInOrderAsOneLine) {
  JobShape shape{1, 2, 0};
  auto log = std::make_shared<SubmissionLog>();
  EngineOptions options;
  options.submissions = log;
  InProcessJob job(shape, options);
  ASSERT_TRUE(job.Start().ok());
  std::vector<float> a(6, 1.0f), out_a(6);
  std::vector<int32_t> b(4, 2), out_b(4);
  const int64_t shape_a[2] = {2, 3};
  Completion done[2][2];
  for (int r = 0; r < 2; ++r) {
    TensorView ta{};
    ta.data = a.data();
    ta.num_elements = 6;
    ta.dtype = static_cast<int32_t>(DataType::kFloat32);
    ta.device = -1;
    ta.ndim = 2;
    ta.shape = shape_a;
    ASSERT_TRUE(job.rank(r).Submit(ta, out_a.data(), "w", 7, ReduceOp::kAverage, Completion::Callback, &done[r][0]).ok());
    TensorView tb{};
    tb.data = b.data();
    tb.num_elements = 4;
    tb.dtype = static_cast<int32_t>(DataType::kInt32);
    tb.device = -1;  // no shape: 1-D
    ASSERT_TRUE(job.rank(r).Submit(tb, out_b.data(), "n", 0, ReduceOp::kSum, Completion::Callback, &done[r][1]).ok());
  }
  for (auto& rank : done) {
    for (auto& d : rank) ASSERT_TRUE(d.Wait(20));
  }
  // Both ranks share this log here (one process per rank in a real job).
  ASSERT_EQ(log->count(), 4);
  std::string line;
  ASSERT_TRUE(log->Line(0, &line));
  EXPECT_EQ(line, "0 1 7 -1 2 2 3 w");
  ASSERT_TRUE(log->Line(1, &line));
  EXPECT_EQ(line, "4 0 0 -1 1 4 n");
  EXPECT_FALSE(log->Line(4, &line));
  EXPECT_FALSE(log->Line(-1, &line));
  job.Stop();
}

TEST(SubmissionLog, KeepsTheMostRecentOnly) {
  SubmissionLog log;
  for (size_t i = 0; i < SubmissionLog::kKept + 5; ++i) {
    Submission s;
    s.name = "t" + std::to_string(i);
    log.Record(s);
  }
  std::string line;
  EXPECT_FALSE(log.Line(4, &line));
  ASSERT_TRUE(log.Line(5, &line));
  EXPECT_EQ(line, "0 0 0 -1 0 t5");
  EXPECT_EQ(log.count(), static_cast<int64_t>(SubmissionLog::kKept + 5));
}

TEST(JoinMark, ARowOfMinusOnesInAMarkedRoundNamesTheJoinedRank) {
  const std::string name = std::string("bps.tf.allgather/x.lengths") + kJoinMark;
  std::vector<int64_t> table = {3, 3, -1, -1, 5, 5};  // rank 1 joined
  Status st = CheckNoRankJoined(name, table.data(), DataType::kInt64, 3, 6);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("allgather cannot run while a rank has joined: rank(s) 1"), std::string::npos)
      << st.message();
  Status torch_style = CheckNoRankJoined(std::string("agree.broadcast.2") + kJoinMark, table.data(), DataType::kInt64,
                                        3, 6);
  EXPECT_NE(torch_style.message().find("broadcast cannot run while a rank has joined"), std::string::npos)
      << torch_style.message();
  std::vector<int32_t> partial = {-1, 4, 2, 2};  // no row all -1
  EXPECT_TRUE(CheckNoRankJoined(name, partial.data(), DataType::kInt32, 2, 4).ok());
  // Unmarked rounds and float tables are never checked.
  EXPECT_TRUE(CheckNoRankJoined("bps.tf.allgather/x.lengths", table.data(), DataType::kInt64, 3, 6).ok());
  std::vector<float> floats = {-1, -1};
  EXPECT_TRUE(CheckNoRankJoined(name, floats.data(), DataType::kFloat32, 1, 2).ok());
}

}  // namespace
}  // namespace bps
