// Tensor fusion (core/fusion_plan.h, core/fused_group.h): the plan packs
// same-dtype, same-reduce-op tensors in priority order; over whole in-process
// jobs (real sockets, real shared memory) every member of a group gets its
// own exact sum and its own completion, a mismatch fails the member that
// differs under its name, compressed tensors fuse with a segment each and get
// the result they get unfused, and a bucket's failure reaches each member by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/fused_group.h"
#include "core/fusion_plan.h"
#include "in_process_job.h"

namespace bps {
namespace {

using testing_support::Completion;
using testing_support::InProcessJob;
using testing_support::JobShape;

FusionCandidate Candidate(int64_t bytes, int32_t priority, DataType dtype = DataType::kFloat32,
                          ReduceOp op = ReduceOp::kSum, bool alone = false) {
  FusionCandidate c;
  c.bytes = bytes;
  c.priority = priority;
  c.dtype = dtype;
  c.reduce_op = op;
  c.alone = alone;
  return c;
}

std::vector<std::vector<size_t>> Members(const std::vector<FusionBucket>& plan) {
  std::vector<std::vector<size_t>> out;
  for (const auto& b : plan) out.push_back(b.members);
  return out;
}

TEST(FusionPlan, PacksUpToTheLimitInPriorityOrder) {
  // Priorities descend with the index, as the torch optimizer gives them.
  std::vector<FusionCandidate> group = {Candidate(40, 0), Candidate(40, -1), Candidate(40, -2), Candidate(40, -3)};
  auto plan = PlanFusion(group, 100);
  EXPECT_EQ(Members(plan), (std::vector<std::vector<size_t>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(plan[0].priority, 0);
  EXPECT_EQ(plan[1].priority, -2);
}

TEST(FusionPlan, TakesTensorsHighestPriorityFirstWhateverTheirOrder) {
  // Gradients arrive last layer first (lowest priority first).
  std::vector<FusionCandidate> group = {Candidate(40, -3), Candidate(40, -2), Candidate(40, -1), Candidate(40, 0)};
  auto plan = PlanFusion(group, 100);
  EXPECT_EQ(Members(plan), (std::vector<std::vector<size_t>>{{3, 2}, {1, 0}}));
  // No bucket runs below the priority of any of its members.
  for (const auto& b : plan) {
    for (size_t i : b.members) EXPECT_GE(b.priority, group[i].priority);
  }
}

TEST(FusionPlan, SeparatesDtypesAndReduceOps) {
  std::vector<FusionCandidate> group = {Candidate(8, 0), Candidate(8, 0, DataType::kInt32),
                                        Candidate(8, 0, DataType::kFloat32, ReduceOp::kAverage), Candidate(8, 0),
                                        Candidate(8, 0, DataType::kInt32)};
  auto plan = PlanFusion(group, 1 << 20);
  EXPECT_EQ(Members(plan), (std::vector<std::vector<size_t>>{{0, 3}, {1, 4}, {2}}));
}

TEST(FusionPlan, CompressionClassesShareNoBucket) {
  std::vector<FusionCandidate> group = {Candidate(8, 0), Candidate(8, 0), Candidate(8, 0), Candidate(8, 0)};
  group[1].compression = 1;
  group[3].compression = 1;
  group[2].compression = 2;
  EXPECT_EQ(Members(PlanFusion(group, 100)), (std::vector<std::vector<size_t>>{{0}, {1, 3}, {2}}));
}

TEST(FusionPlan, LargeAloneAndUnfusedTensorsTravelAlone) {
  std::vector<FusionCandidate> group = {Candidate(8, 0), Candidate(100, 0), Candidate(8, 0, DataType::kFloat32,
                                                                                     ReduceOp::kSum, true),
                                        Candidate(8, 0)};
  EXPECT_EQ(Members(PlanFusion(group, 100)), (std::vector<std::vector<size_t>>{{0, 3}, {1}, {2}}));
  EXPECT_EQ(Members(PlanFusion(group, 0)), (std::vector<std::vector<size_t>>{{0}, {1}, {2}, {3}}));
}

TEST(FusionPlan, BucketNamesDependOnTheMemberList) {
  const std::string ab = FusedBucketName({"a", "b"}, DataType::kFloat32, ReduceOp::kSum);
  EXPECT_EQ(ab, FusedBucketName({"a", "b"}, DataType::kFloat32, ReduceOp::kSum));
  EXPECT_NE(ab, FusedBucketName({"a", "c"}, DataType::kFloat32, ReduceOp::kSum));
  EXPECT_NE(ab, FusedBucketName({"b", "a"}, DataType::kFloat32, ReduceOp::kSum));
  EXPECT_NE(ab, FusedBucketName({"ab"}, DataType::kFloat32, ReduceOp::kSum));
  EXPECT_NE(ab, FusedBucketName({"a", "b"}, DataType::kFloat32, ReduceOp::kAverage));
  EXPECT_NE(ab.find("[a..b x2]"), std::string::npos) << ab;
}

// One member of a group on one rank: its buffers and completion.
struct Slot {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> in, out;
  Completion done;
};

GroupMember MemberOf(Slot& s, int32_t priority, ReduceOp op = ReduceOp::kSum) {
  GroupMember m;
  m.input.data = s.in.data();
  m.input.num_elements = static_cast<int64_t>(s.in.size());
  m.input.dtype = static_cast<int32_t>(DataType::kFloat32);
  m.input.ndim = static_cast<int32_t>(s.shape.size());
  m.input.shape = s.shape.empty() ? nullptr : s.shape.data();
  m.output = s.out.data();
  m.name = s.name;
  m.priority = priority;
  m.reduce_op = op;
  m.done = Completion::Callback;
  m.user_data = &s.done;
  return m;
}

uint64_t OpsCompleted(Engine& e) {
  const std::string json = e.StatsJson();
  const size_t at = json.find("\"ops_completed\": ");
  return at == std::string::npos ? 0 : std::stoull(json.substr(at + 17));
}

class FusedGroupJob : public ::testing::TestWithParam<JobShape> {};

// Rank r's element i of tensor t: exact in float32 sums.
float Value(int rank, int t, int64_t i) { return static_cast<float>((rank + 1) * (t + 1) + i % 5); }

TEST_P(FusedGroupJob, EveryMemberGetsItsOwnExactSumAndCompletion) {
  InProcessJob job(GetParam());
  ASSERT_TRUE(job.Start().ok());
  const int world = job.size();
  const std::vector<int64_t> counts = {3, 1000, 7, 0, 2500, 64, 1};  // 2500 floats: past the limit below
  constexpr int kRounds = 2;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::vector<std::unique_ptr<Slot>>> slots(world);
    std::vector<uint64_t> ops_before(world);
    for (int r = 0; r < world; ++r) {
      ops_before[r] = OpsCompleted(job.rank(r));
      std::vector<GroupMember> group;
      for (size_t t = 0; t < counts.size(); ++t) {
        auto s = std::make_unique<Slot>();
        s->name = "layer" + std::to_string(t);
        for (int64_t i = 0; i < counts[t]; ++i) s->in.push_back(Value(r, static_cast<int>(t), i) + round);
        s->out.assign(counts[t], -1.0f);
        if (t == 2) s->out = s->in;  // in place below
        group.push_back(MemberOf(*s, -static_cast<int32_t>(t)));
        if (t == 2) group.back().output = s->in.data();
        slots[r].push_back(std::move(s));
      }
      GroupOptions options;
      options.fusion_bytes = 8192;
      GroupReport report;
      Status st = SubmitGroup(job.rank(r), group, options, &report);
      ASSERT_TRUE(st.ok()) << st.message();
      // {0,1,2,3,5,6} fit 8 KB in priority order (with 4000 + 12 + 4 + 256 +
      // 4 bytes), 2500 floats travel alone: two operations instead of seven.
      EXPECT_EQ(report.operations, 2);
      EXPECT_EQ(report.fused_members, 6);
    }
    for (int r = 0; r < world; ++r) {
      for (size_t t = 0; t < counts.size(); ++t) {
        Slot& s = *slots[r][t];
        ASSERT_TRUE(s.done.Wait(30)) << "rank " << r << " '" << s.name << "' never completed";
        ASSERT_EQ(s.done.code, StatusCode::kOk) << s.done.message;
        const std::vector<float>& result = t == 2 ? s.in : s.out;
        for (int64_t i = 0; i < counts[t]; ++i) {
          float expected = 0;
          for (int q = 0; q < world; ++q) expected += Value(q, static_cast<int>(t), i) + round;
          ASSERT_EQ(result[i], expected) << "rank " << r << " '" << s.name << "' element " << i;
        }
      }
      EXPECT_EQ(OpsCompleted(job.rank(r)) - ops_before[r], 2u) << "rank " << r;
    }
  }
  job.Stop();
}

TEST_P(FusedGroupJob, AMismatchFailsTheMemberThatDiffersUnderItsOwnName) {
  InProcessJob job(GetParam());
  ASSERT_TRUE(job.Start().ok());
  const int world = job.size();
  std::vector<std::vector<std::unique_ptr<Slot>>> slots(world);
  for (int r = 0; r < world; ++r) {
    std::vector<GroupMember> group;
    for (int t = 0; t < 3; ++t) {
      auto s = std::make_unique<Slot>();
      s->name = "weights" + std::to_string(t);
      // The same 20 elements everywhere (so the same buckets), but
      // 'weights1' is [4, 5] on rank 0 and [5, 4] elsewhere.
      s->shape = t == 1 ? (r == 0 ? std::vector<int64_t>{4, 5} : std::vector<int64_t>{5, 4})
                        : std::vector<int64_t>{20};
      s->in.assign(20, static_cast<float>(r + 1));
      s->out.assign(20, -1.0f);
      group.push_back(MemberOf(*s, 0));
      slots[r].push_back(std::move(s));
    }
    GroupReport report;
    ASSERT_TRUE(SubmitGroup(job.rank(r), group, GroupOptions(), &report).ok());
    EXPECT_EQ(report.fused_members, 3);
  }
  const float sum = static_cast<float>(world * (world + 1) / 2);
  for (int r = 0; r < world; ++r) {
    for (int t = 0; t < 3; ++t) {
      Slot& s = *slots[r][t];
      ASSERT_TRUE(s.done.Wait(30)) << "rank " << r << " '" << s.name << "' never completed";
      if (t == 1) {
        EXPECT_EQ(s.done.code, StatusCode::kMismatch) << s.done.message;
        EXPECT_NE(s.done.message.find("'weights1'"), std::string::npos) << s.done.message;
        EXPECT_EQ(s.done.message.find("fused"), std::string::npos) << s.done.message;
      } else {
        EXPECT_EQ(s.done.code, StatusCode::kOk) << "'" << s.name << "': " << s.done.message;
        EXPECT_EQ(s.out, std::vector<float>(20, sum)) << "rank " << r << " '" << s.name << "'";
      }
    }
  }
  job.Stop();
}

// Compressed tensors fuse with tensors of the same compression, a segment
// each: with the bucket in one slice (large partitions), onebit gives each
// member a scale of its own, so every member's answer is bit for bit the one
// it gets pushed alone, though the two differ 1000-fold in magnitude; an
// uncompressed member of the group never joins their bucket.
TEST(FusedGroup, CompressedTensorsFuseWithAScalePerTensor) {
  JobShape shape{2, 1, 1};
  shape.partition_bytes = 1 << 20;
  InProcessJob job(shape);
  ASSERT_TRUE(job.Start().ok());
  const int world = job.size();
  const std::vector<int64_t> counts = {20000, 30000, 10};  // 80 KB and 120 KB: past BYTEPS_MIN_COMPRESS_BYTES
  const std::vector<float> scales = {1.0f, 1e-3f, 1.0f};
  auto gradient = [&](int r, int t, int64_t i) {
    return scales[t] * static_cast<float>(((i * 7919 + r * 31 + t * 17) % 101) - 50) / 8.0f;
  };
  std::vector<std::vector<std::unique_ptr<Slot>>> slots(world), alone(world);
  for (int r = 0; r < world; ++r) {
    std::vector<GroupMember> group;
    for (int t = 0; t < 3; ++t) {
      auto s = std::make_unique<Slot>();
      s->name = "grouped" + std::to_string(t);
      if (t < 2) {
        ASSERT_TRUE(job.rank(r).DeclareCompression(s->name, "onebit").ok());
        ASSERT_TRUE(job.rank(r).DeclareCompression("alone" + std::to_string(t), "onebit").ok());
      }
      for (int64_t i = 0; i < counts[t]; ++i) s->in.push_back(gradient(r, t, i));
      s->out.assign(counts[t], 0.0f);
      group.push_back(MemberOf(*s, -t));
      slots[r].push_back(std::move(s));
    }
    GroupReport report;
    ASSERT_TRUE(SubmitGroup(job.rank(r), group, GroupOptions(), &report).ok());
    EXPECT_EQ(report.operations, 2);     // the two compressed ones together, the small one alone
    EXPECT_EQ(report.fused_members, 2);
    for (int t = 0; t < 2; ++t) {  // each compressed tensor again, unfused, under a name of the same compression
      auto a = std::make_unique<Slot>();
      a->in = slots[r][t]->in;
      a->out.assign(counts[t], 0.0f);
      TensorView v{};
      v.data = a->in.data();
      v.num_elements = counts[t];
      v.dtype = static_cast<int32_t>(DataType::kFloat32);
      ASSERT_TRUE(job.rank(r)
                      .Submit(v, a->out.data(), "alone" + std::to_string(t), -1, ReduceOp::kSum, Completion::Callback,
                              &a->done)
                      .ok());
      alone[r].push_back(std::move(a));
    }
  }
  for (int r = 0; r < world; ++r) {
    for (auto& s : slots[r]) {
      ASSERT_TRUE(s->done.Wait(30));
      ASSERT_EQ(s->done.code, StatusCode::kOk) << s->done.message;
    }
    for (int t = 0; t < 2; ++t) {
      ASSERT_TRUE(alone[r][t]->done.Wait(30));
      ASSERT_EQ(alone[r][t]->done.code, StatusCode::kOk) << alone[r][t]->done.message;
      EXPECT_EQ(0, memcmp(slots[r][t]->out.data(), alone[r][t]->out.data(), counts[t] * sizeof(float)))
          << "rank " << r << " tensor " << t << ": fused and alone differ";
    }
    // The uncompressed member is the exact sum.
    for (int64_t i = 0; i < counts[2]; ++i) {
      float exact = 0;
      for (int q = 0; q < world; ++q) exact += gradient(q, 2, i);
      ASSERT_EQ(slots[r][2]->out[i], exact);
    }
  }
  // The job did compress (the small-magnitude member is not its exact sum,
  // and not at the large one's scale).
  bool differs = false;
  for (int64_t i = 0; i < counts[1] && !differs; ++i) {
    float exact = 0;
    for (int q = 0; q < world; ++q) exact += gradient(q, 1, i);
    differs = slots[0][1]->out[i] != exact;
  }
  EXPECT_TRUE(differs) << "onebit left every element exact: the tensors were not compressed";
  for (int64_t i = 0; i < counts[1]; ++i) ASSERT_LT(std::abs(slots[0][1]->out[i]), 1.0f) << i;
  job.Stop();
}

TEST_P(FusedGroupJob, ABucketsFailureReachesEveryMemberByName) {
  InProcessJob job(GetParam());
  ASSERT_TRUE(job.Start().ok());
  // Only rank 0 submits, with a deadline: its bucket can never complete.
  std::vector<std::unique_ptr<Slot>> slots;
  std::vector<GroupMember> group;
  for (int t = 0; t < 3; ++t) {
    auto s = std::make_unique<Slot>();
    s->name = "lonely" + std::to_string(t);
    s->in.assign(8, 1.0f);
    s->out.assign(8, 0.0f);
    group.push_back(MemberOf(*s, 0));
    slots.push_back(std::move(s));
  }
  GroupOptions options;
  options.timeout_seconds = 0.5;
  ASSERT_TRUE(SubmitGroup(job.rank(0), group, options).ok());
  for (auto& s : slots) {
    ASSERT_TRUE(s->done.Wait(30)) << "'" << s->name << "' never completed";
    EXPECT_EQ(s->done.code, StatusCode::kDeadlineExceeded) << s->done.message;
    EXPECT_NE(s->done.message.find("tensor '" + s->name + "'"), std::string::npos) << s->done.message;
    EXPECT_EQ(s->out, std::vector<float>(8, 0.0f)) << "a failed member's output was written";
  }
  job.Stop();
}

TEST(FusedGroup, ARefusedGroupCallsNoDone) {
  JobShape shape;
  InProcessJob job(shape);
  ASSERT_TRUE(job.Start().ok());
  Slot good, bad;
  good.name = "good";
  good.in.assign(4, 1.0f);
  good.out.assign(4, 0.0f);
  bad.name = "";  // refused: no name
  bad.in.assign(4, 1.0f);
  bad.out.assign(4, 0.0f);
  Status st = SubmitGroup(job.rank(0), {MemberOf(good, 0), MemberOf(bad, 0)}, GroupOptions());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("group member 1"), std::string::npos) << st.message();
  EXPECT_FALSE(good.done.Wait(0.3));
  job.Stop();
}

JobShape Layout(int machines, int local, int servers) {
  JobShape s;
  s.machines = machines;
  s.local_size = local;
  s.servers = servers;
  s.timeout_seconds = 20;
  return s;
}

// Across machines (the servers compare) and within one (shared memory compares).
INSTANTIATE_TEST_SUITE_P(Layouts, FusedGroupJob,
                         ::testing::Values(Layout(2, 1, 1), Layout(1, 2, 0), Layout(2, 2, 2)),
                         testing_support::LayoutName);

}  // namespace
}  // namespace bps
