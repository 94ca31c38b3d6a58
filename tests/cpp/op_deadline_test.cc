// Per-op deadlines and cancel (issue 40 item 3): a deadline that passes or a
// cancel fails that op on every rank still waiting in its round, naming the
// cause and the rank it came from, well before BYTEPS_TIMEOUT; a rank that
// comes to the round late fails it too; and the name then works again on
// every rank, with exact sums.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "in_process_job.h"

namespace bps {
namespace {

using testing_support::Completion;
using testing_support::InProcessJob;
using testing_support::JobShape;

struct Op {
  std::vector<float> in, out;
  Completion done;
  uint64_t id = 0;
  Op(int rank) : in(3000, static_cast<float>(rank + 1)), out(3000) {}
  Status Submit(Engine& engine, const std::string& name, double timeout_seconds = 0) {
    TensorView t{};
    t.data = in.data();
    t.dtype = static_cast<int32_t>(DataType::kFloat32);
    t.num_elements = static_cast<int64_t>(in.size());
    t.device = -1;
    SubmitOptions options;
    options.timeout_seconds = timeout_seconds;
    return engine.Submit(t, out.data(), name, 0, ReduceOp::kSum, Completion::Callback, &done, options, &id);
  }
};

class OpDeadline : public ::testing::TestWithParam<JobShape> {
 protected:
  void SetUp() override {
    JobShape shape = GetParam();
    shape.timeout_seconds = 30;  // far beyond what any wait here may take
    job_.reset(new InProcessJob(shape));
    Status st = job_->Start();
    ASSERT_TRUE(st.ok()) << st.message();
  }
  void TearDown() override { job_->Stop(); }

  // Every rank submits `name`; all must get the exact sum 1 + 2 + ... + size.
  void ExpectNameWorksEverywhere(const std::string& name) {
    const int n = job_->size();
    std::vector<std::unique_ptr<Op>> ops;
    for (int r = 0; r < n; ++r) {
      ops.emplace_back(new Op(r));
      ASSERT_TRUE(ops[r]->Submit(job_->rank(r), name).ok());
    }
    const float sum = static_cast<float>(n * (n + 1) / 2);
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(ops[r]->done.Wait(20)) << "rank " << r << " hung reusing '" << name << "'";
      ASSERT_EQ(ops[r]->done.code, StatusCode::kOk) << ops[r]->done.message;
      for (float v : ops[r]->out) ASSERT_EQ(v, sum);
    }
  }

  // Ranks 0..size-2 wait in a round of `name` that the last rank has not
  // joined; `fail` ends it from rank 0. Every waiting rank fails with `code`
  // and a message holding every text of `expect`; then the last rank comes
  // and fails too, and the name works again everywhere.
  template <typename Fail>
  void ExpectRoundFailsEverywhere(const std::string& name, double rank0_timeout, Fail fail, StatusCode code,
                                  const std::vector<std::string>& expect) {
    const int n = job_->size();
    std::vector<std::unique_ptr<Op>> ops;
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0; r + 1 < n; ++r) {
      ops.emplace_back(new Op(r));
      ASSERT_TRUE(ops[r]->Submit(job_->rank(r), name, r == 0 ? rank0_timeout : 0).ok());
    }
    fail(*ops[0]);
    for (int r = 0; r + 1 < n; ++r) {
      ASSERT_TRUE(ops[r]->done.Wait(10)) << "rank " << r << " still waits after rank 0's op ended";
      EXPECT_EQ(ops[r]->done.code, code) << "rank " << r << ": " << ops[r]->done.message;
      for (const auto& text : expect) {
        EXPECT_NE(ops[r]->done.message.find(text), std::string::npos) << "rank " << r << ": " << ops[r]->done.message;
      }
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(waited, 10) << "the round's end took as long as BYTEPS_TIMEOUT";
    // The last rank comes to the round late: it fails with the same cause.
    Op late(n - 1);
    ASSERT_TRUE(late.Submit(job_->rank(n - 1), name).ok());
    ASSERT_TRUE(late.done.Wait(10)) << "the late rank hung in a round the others abandoned";
    EXPECT_EQ(late.done.code, code) << late.done.message;
    EXPECT_NE(late.done.message.find(expect.front()), std::string::npos) << late.done.message;
    ExpectNameWorksEverywhere(name);
  }

  std::unique_ptr<InProcessJob> job_;
};

TEST_P(OpDeadline, APassedDeadlineFailsTheRoundOnEveryRankAndTheNameWorksAgain) {
  ExpectNameWorksEverywhere("grad");
  ExpectRoundFailsEverywhere(
      "grad", 0.5, [](Op&) {}, StatusCode::kDeadlineExceeded,
      {"passed its deadline of 0.5 s on rank 0", "'grad'"});
}

TEST_P(OpDeadline, ACancelFailsTheRoundOnEveryRankAndTheNameWorksAgain) {
  ExpectRoundFailsEverywhere(
      "weights", 0,
      [&](Op& op0) {
        Status st = job_->rank(0).Cancel(op0.id, "the user stopped the step");
        ASSERT_TRUE(st.ok()) << st.message();
      },
      StatusCode::kCancelled, {"cancelled on rank 0: the user stopped the step", "'weights'"});
}

TEST_P(OpDeadline, ADeadlineThatDoesNotPassChangesNothing) {
  const int n = job_->size();
  for (int step = 0; step < 3; ++step) {
    std::vector<std::unique_ptr<Op>> ops;
    for (int r = 0; r < n; ++r) {
      ops.emplace_back(new Op(r));
      ASSERT_TRUE(ops[r]->Submit(job_->rank(r), "quick", 0.3).ok());
    }
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(ops[r]->done.Wait(20));
      ASSERT_EQ(ops[r]->done.code, StatusCode::kOk) << ops[r]->done.message;
    }
    // A cancel after completion is taken and changes nothing.
    EXPECT_TRUE(job_->rank(0).Cancel(ops[0]->id, "too late").ok());
  }
  // The alarms of completed ops were taken back: nothing fails later.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_FALSE(job_->rank(0).failed());
  ExpectNameWorksEverywhere("quick");
}

TEST_P(OpDeadline, BadRequestsAreRefusedNamingTheCause) {
  Op op(0);
  Status st = op.Submit(job_->rank(0), "x", -1);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("deadline must be >= 0"), std::string::npos) << st.message();
  st = job_->rank(0).Cancel(12345, "no such op");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("no operation with id 12345"), std::string::npos) << st.message();
}

INSTANTIATE_TEST_SUITE_P(Layouts, OpDeadline,
                         ::testing::Values(JobShape{2, 1, 1}, JobShape{1, 2, 0}, JobShape{2, 2, 2}),
                         testing_support::LayoutName);

}  // namespace
}  // namespace bps
