// The engine's record of every accepted submission (join()'s log) and its
// rule for rounds that fail once a rank joined (csrc/core/join_mark.h).
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "core/fused_group.h"
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

// A group (the engine's fusion) is one entry with its members: a joined rank
// that stands in with the same group of zeros, parsed from the others' log,
// meets their buckets (same names and member shapes), and every member of the
// rank still training gets its own value back.
TEST(SubmissionLog, AGroupIsOneEntryAndItsStandInMeetsTheBuckets) {
  JobShape shape{2, 1, 1};  // 2 machines: the buckets go through a server, where signatures are compared
  auto log = std::make_shared<SubmissionLog>();
  EngineOptions options;
  options.submissions = log;
  InProcessJob job(shape, options);
  ASSERT_TRUE(job.Start().ok());
  const std::vector<std::string> names = {"g/a", "g/b", "g/c"};
  const std::vector<std::vector<int64_t>> shapes = {{2, 3}, {5}, {}};
  std::vector<std::vector<float>> in(3), out(3);
  Completion done[3];
  std::vector<GroupMember> group;
  for (int t = 0; t < 3; ++t) {
    int64_t n = 1;
    for (int64_t d : shapes[t]) n *= d;
    for (int64_t i = 0; i < n; ++i) in[t].push_back(static_cast<float>(10 * t + i));
    out[t].assign(n, -1.0f);
    GroupMember m;
    m.input.data = in[t].data();
    m.input.num_elements = n;
    m.input.dtype = static_cast<int32_t>(DataType::kFloat32);
    m.input.ndim = static_cast<int32_t>(shapes[t].size());
    m.input.shape = shapes[t].empty() ? nullptr : shapes[t].data();
    m.output = out[t].data();
    m.name = names[t];
    m.priority = -t;
    m.done = Completion::Callback;
    m.user_data = &done[t];
    group.push_back(m);
  }
  GroupOptions group_options;
  group_options.fusion_bytes = 4096;
  GroupReport report;
  ASSERT_TRUE(SubmitGroup(job.rank(0), group, group_options, &report).ok());
  EXPECT_EQ(report.operations, 1);  // one bucket of three
  ASSERT_EQ(log->count(), 1);
  std::string line;
  ASSERT_TRUE(log->Line(0, &line));
  EXPECT_EQ(line, "group 4096 3\n0 0 0 -1 2 2 3 g/a\n0 0 -1 -1 1 5 g/b\n0 0 -2 -1 0 g/c");

  // Rank 1 stands in from the line alone, as join() does.
  std::istringstream lines(line);
  std::string head;
  std::getline(lines, head);
  std::istringstream head_fields(head.substr(6));
  int64_t fusion_bytes = 0, count = 0;
  head_fields >> fusion_bytes >> count;
  std::vector<std::vector<float>> zeros;
  std::vector<std::vector<int64_t>> stand_in_shapes;
  std::vector<std::string> stand_in_names;
  std::vector<int32_t> priorities;
  for (std::string member; std::getline(lines, member);) {
    std::istringstream f(member);
    int dtype, op, priority, device;
    size_t ndim;
    f >> dtype >> op >> priority >> device >> ndim;
    std::vector<int64_t> dims(ndim);
    int64_t n = 1;
    for (auto& d : dims) {
      f >> d;
      n *= d;
    }
    std::string name;
    f >> name;
    zeros.emplace_back(n, 0.0f);
    stand_in_shapes.push_back(dims);
    stand_in_names.push_back(name);
    priorities.push_back(priority);
  }
  ASSERT_EQ(static_cast<int64_t>(zeros.size()), count);
  std::vector<std::vector<float>> stand_in_out(zeros.size());
  Completion stand_in_done[3];
  std::vector<GroupMember> stand_in;
  for (size_t t = 0; t < zeros.size(); ++t) {
    stand_in_out[t].assign(zeros[t].size(), -1.0f);
    GroupMember m;
    m.input.data = zeros[t].data();
    m.input.num_elements = static_cast<int64_t>(zeros[t].size());
    m.input.dtype = static_cast<int32_t>(DataType::kFloat32);
    m.input.ndim = static_cast<int32_t>(stand_in_shapes[t].size());
    m.input.shape = stand_in_shapes[t].empty() ? nullptr : stand_in_shapes[t].data();
    m.output = stand_in_out[t].data();
    m.name = stand_in_names[t];
    m.priority = priorities[t];
    m.done = Completion::Callback;
    m.user_data = &stand_in_done[t];
    stand_in.push_back(m);
  }
  group_options.fusion_bytes = fusion_bytes;
  ASSERT_TRUE(SubmitGroup(job.rank(1), stand_in, group_options).ok());
  for (int t = 0; t < 3; ++t) {
    ASSERT_TRUE(done[t].Wait(20)) << names[t];
    ASSERT_EQ(done[t].code, StatusCode::kOk) << done[t].message;
    ASSERT_TRUE(stand_in_done[t].Wait(20)) << names[t];
    EXPECT_EQ(out[t], in[t]) << names[t] << ": rank 0's value plus the stand-in's zeros";
  }
  EXPECT_EQ(log->count(), 2);  // the stand-in's group: one entry too
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
