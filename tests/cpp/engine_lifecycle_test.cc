// Engine lifecycle through the process-wide engine (the C ABI's ProcessEngine):
// every accepted submission completes, even one racing with Shutdown (bug 3),
// and a failed Init leaves nothing running and can be retried (bug 4).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "c_api/process_engine.h"
#include "core/engine.h"
#include "engine_harness.h"

namespace bps {
namespace {

using testing_support::InProcessScheduler;
using testing_support::ScopedEnv;

struct Counters {
  std::atomic<int> accepted{0};
  std::atomic<int> completed{0};
};

// As the C ABI submits: to whichever engine runs at the time of the call.
Status SubmitToProcessEngine(const TensorView& t, void* out, const std::string& name, Counters* counters);

void CountCompletion(void* user_data, int32_t, const char*) {
  static_cast<Counters*>(user_data)->completed++;
}

Status SubmitToProcessEngine(const TensorView& t, void* out, const std::string& name, Counters* counters) {
  std::shared_ptr<Engine> engine = ProcessEngine::Get().engine();
  if (!engine) return Status(StatusCode::kNotInitialized, "not initialised");
  return engine->Submit(t, out, name, 0, ReduceOp::kSum, CountCompletion, counters);
}

TEST(EngineLifecycle, EverySubmissionAcceptedDuringShutdownCompletes) {
  ScopedEnv env({{"DMLC_NUM_WORKER", "1"}, {"DMLC_NUM_SERVER", "0"}, {"BYTEPS_LOCAL_SIZE", "1"},
                 {"BYTEPS_LOCAL_RANK", "0"}, {"BYTEPS_FORCE_DISTRIBUTED", "0"}, {"BYTEPS_TIMEOUT", "20"}});
  ProcessEngine& engine = ProcessEngine::Get();
  for (int cycle = 0; cycle < 40; ++cycle) {
    Status init = engine.Init(nullptr);
    ASSERT_TRUE(init.ok()) << init.message();
    std::atomic<bool> stop{false};
    constexpr int kSubmitters = 3;
    Counters counters[kSubmitters];
    std::vector<std::thread> submitters;
    for (int s = 0; s < kSubmitters; ++s) {
      submitters.emplace_back([&, s] {
        Counters& mine = counters[s];
        std::vector<float> in(16, 1.0f), out(16);
        TensorView t{};
        t.data = in.data();
        t.dtype = static_cast<int32_t>(DataType::kFloat32);
        t.num_elements = 16;
        t.device = -1;
        const std::string name = "t" + std::to_string(s);
        while (!stop) {
          // A few ops in flight per thread, like a training step's gradients.
          if (mine.accepted.load() - mine.completed.load() >= 4) {
            std::this_thread::yield();
            continue;
          }
          if (SubmitToProcessEngine(t, out.data(), name, &mine).ok()) {
            mine.accepted++;
          }
        }
        // Buffers must outlive every accepted op: wait for the completions.
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (mine.completed.load() < mine.accepted.load() && std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    engine.Shutdown();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    stop = true;
    for (auto& th : submitters) th.join();
    for (int s = 0; s < kSubmitters; ++s) {
      ASSERT_EQ(counters[s].completed.load(), counters[s].accepted.load())
          << "cycle " << cycle << ": an accepted push_pull never completed (its wait() would hang)";
    }
  }
}

TEST(EngineLifecycle, AFailedInitLeavesNothingRunningAndCanBeRetried) {
  const std::string token = "lifecycle-test-token";
  auto scheduler = std::make_unique<InProcessScheduler>(token);
  ScopedEnv env({{"DMLC_NUM_WORKER", "2"}, {"DMLC_NUM_SERVER", "1"}, {"DMLC_WORKER_ID", "0"},
                 {"BYTEPS_LOCAL_SIZE", "1"}, {"BYTEPS_LOCAL_RANK", "0"}, {"DMLC_PS_ROOT_URI", "127.0.0.1"},
                 {"DMLC_PS_ROOT_PORT", std::to_string(scheduler->port())}, {"BYTEPS_JOB_TOKEN", token},
                 {"BYTEPS_RENDEZVOUS_TIMEOUT", "1"}, {"BYTEPS_TIMEOUT", "30"}});
  ProcessEngine& engine = ProcessEngine::Get();
  // Rank 1 never comes: the rendezvous times out after the scheduler
  // connections and the abort watcher were set up.
  Status st = engine.Init(nullptr);
  ASSERT_EQ(st.code(), StatusCode::kTimeout) << st.message();
  EXPECT_NE(st.message().find("1 of 2 workers"), std::string::npos) << st.message();
  EXPECT_EQ(engine.engine(), nullptr);
  // Everything Init opened is closed again: the scheduler sees its clients go
  // and ends. (A failed job whose workers have not all arrived keeps its
  // scheduler 4 s after the failure, so a late worker hears the verdict.)
  EXPECT_TRUE(scheduler->WaitUntilAllClientsLeft(10)) << "a failed Init left scheduler connections open";
  scheduler.reset();

  // A retry (against a fresh scheduler) fails cleanly too, twice: first by
  // the rendezvous timeout; then the scheduler has published the abort that
  // the first attempt's departure without goodbye caused, and the retry
  // reports that instead. Either way no thread of an earlier attempt is left
  // joinable (std::terminate before the fix of bug 4).
  InProcessScheduler second(token);
  ScopedEnv env2({{"DMLC_PS_ROOT_PORT", std::to_string(second.port())}});
  for (int attempt = 0; attempt < 2; ++attempt) {
    st = engine.Init(nullptr);
    ASSERT_TRUE(st.code() == StatusCode::kTimeout || (attempt > 0 && st.code() == StatusCode::kPeerFailure &&
                                             st.message().find("job aborted") != std::string::npos))
        << "attempt " << attempt << ": " << st.message();
    EXPECT_EQ(engine.engine(), nullptr);
  }
}

}  // namespace
}  // namespace bps
