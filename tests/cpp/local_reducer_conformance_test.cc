// The LocalReducer conformance suite of host reducers: one generic set of
// cases, instantiated per implementation (add one to the INSTANTIATE line
// below when adding one). Reducers whose steps are collectives have their
// own suite, sequenced_reducer_conformance.h (emulated and NCCL). L local ranks are L reducer objects of one machine; a
// single test thread drives all of their non-blocking steps round-robin, as
// independent engine threads would, so no case depends on timing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/partitioner.h"
#include "local/local_reducer.h"
#include "store/memory_store.h"

namespace bps {
namespace {

struct Case {
  std::string reducer;
  HostReducerFactory create;
  int local_size;
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return info.param.reducer + "_" + std::to_string(info.param.local_size) + "ranks";
}

class LocalReducerConformance : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    static std::atomic<int> groups{0};
    const int L = GetParam().local_size;
    store_ = std::make_shared<MemoryStore>();
    reducers_.resize(L);
    peers_.resize(L);
    std::vector<Status> results(L);
    std::vector<std::thread> joiners;
    for (int q = 0; q < L; ++q) {
      joiners.emplace_back([&, q] {
        Config c;
        c.local_rank = q;
        c.local_size = L;
        c.job_id = "lrc" + std::to_string(getpid()) + "g" + std::to_string(groups.load());
        c.rendezvous_timeout_seconds = 20;
        c.local_staging_reserve_bytes = 1 << 20;  // slots from the warm pool and past it
        HostReducer made;
        results[q] = GetParam().create(c, store_.get(), &made);
        reducers_[q] = std::move(made.reducer);
        peers_[q] = std::move(made.peers);
      });
    }
    for (auto& t : joiners) t.join();
    groups++;
    for (int q = 0; q < L; ++q) ASSERT_TRUE(results[q].ok()) << "local rank " << q << ": " << results[q].message();
  }

  int L() const { return GetParam().local_size; }
  LocalReducer& rank(int q) { return *reducers_[q]; }

  std::shared_ptr<MemoryStore> store_;
  std::vector<std::unique_ptr<LocalReducer>> reducers_;
  std::vector<std::unique_ptr<MachinePeers>> peers_;  // the same ranks' machine group
};

// One rank's pass through a round, as the engine drives it.
struct RankRound {
  enum Step { kAcquire, kStage, kReduce, kCross, kGather, kDone, kFailed } step = kAcquire;
  LocalPartition* p = nullptr;
  LocalContribution c;
  std::vector<char> output;
  uint32_t gathered = 0;
  Status error;
  bool staged = false;
};

// Drives every rank's round until all are done or failed. `cross_machine`
// (may be empty) stands for the servers: it may rewrite the owner's slice.
void RunRound(std::vector<std::unique_ptr<LocalReducer>>& reducers, std::vector<RankRound>& ranks, uint64_t key,
              uint32_t round, int64_t divisor, bool distributed,
              const std::function<void(int q, char* own_slice, int64_t count)>& cross_machine = nullptr) {
  const int L = static_cast<int>(reducers.size());
  for (int sweep = 0; sweep < 100000; ++sweep) {
    bool all_finished = true;
    for (int q = 0; q < L; ++q) {
      LocalReducer& r = *reducers[q];
      RankRound& rr = ranks[q];
      const size_t esz = DataTypeSize(rr.c.dtype);
      const uint64_t bytes = static_cast<uint64_t>(rr.c.count) * esz;
      LocalProgress progress;
      switch (rr.step) {
        case RankRound::kAcquire: {
          Status st = r.Acquire(key, bytes, rr.c.dtype, &rr.p);
          if (!st.ok()) {
            if (rr.p) r.FailRound(rr.p, round, st);
            rr.error = st;
            rr.step = RankRound::kFailed;
            break;
          }
          rr.output.assign(bytes, 0);
          rr.step = RankRound::kStage;
          break;
        }
        case RankRound::kStage:
          if (r.StageIn(rr.p, round, rr.c) == LocalProgress::kDone) {
            rr.staged = true;
            rr.step = RankRound::kReduce;
          }
          break;
        case RankRound::kReduce: {
          Status st = r.ReduceOwnSlice(rr.p, round, rr.c, distributed ? nullptr : rr.output.data(), divisor, &progress);
          if (!st.ok()) {
            rr.error = st;
            rr.step = RankRound::kFailed;
          } else if (progress == LocalProgress::kDone) {
            rr.step = distributed ? RankRound::kCross : RankRound::kGather;
            if (!distributed) {
              r.PublishOwnSlice(rr.p, round);
              rr.gathered |= 1u << q;
            }
          }
          break;
        }
        case RankRound::kCross: {
          Range s = SliceOf(rr.c.count, L, q);
          if (cross_machine && s.count > 0) cross_machine(q, r.OwnSlice(rr.p, rr.c), s.count);
          r.PublishOwnSlice(rr.p, round);
          rr.step = RankRound::kGather;
          break;
        }
        case RankRound::kGather: {
          Status st = r.Gather(rr.p, round, rr.c, rr.output.data(), divisor, &rr.gathered, &progress);
          if (!st.ok()) {
            rr.error = st;
            rr.step = RankRound::kFailed;
          } else if (progress == LocalProgress::kDone) {
            rr.step = RankRound::kDone;
          }
          break;
        }
        default:
          break;
      }
      if (rr.step != RankRound::kDone && rr.step != RankRound::kFailed) all_finished = false;
    }
    if (all_finished) break;
  }
  // A failed rank closes its round, as the engine's RetireFailed does.
  for (int q = 0; q < L; ++q) {
    RankRound& rr = ranks[q];
    if (rr.step == RankRound::kFailed) {
      reducers[q]->CloseFailedRound(rr.p, key, static_cast<uint64_t>(rr.c.count) * DataTypeSize(rr.c.dtype),
                                    rr.c.dtype, round, rr.error, rr.staged);
    }
  }
}

// Rank q's input: (q + 1) * (i % 5 + 1) + round, an exact integer in every dtype used.
template <typename T>
std::vector<T> Input(int q, int64_t count, uint32_t round) {
  std::vector<T> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[i] = static_cast<T>((q + 1) * (i % 5 + 1) + round);
  return v;
}

template <typename T>
T Sum(int L, int64_t i, uint32_t round) {
  T s = 0;
  for (int q = 0; q < L; ++q) s += static_cast<T>((q + 1) * (i % 5 + 1) + round);
  return s;
}

template <typename T>
void SetUpRanks(std::vector<RankRound>& ranks, std::vector<std::vector<T>>& inputs, int64_t count, uint32_t round,
                DataType dtype) {
  const int L = static_cast<int>(ranks.size());
  inputs.resize(L);
  for (int q = 0; q < L; ++q) {
    inputs[q] = Input<T>(q, count, round);
    ranks[q] = RankRound();
    ranks[q].c.input = reinterpret_cast<const char*>(inputs[q].data());
    ranks[q].c.count = count;
    ranks[q].c.dtype = dtype;
    ranks[q].c.signature = 7;
    ranks[q].c.tensor_bytes = static_cast<uint64_t>(count) * sizeof(T);
    ranks[q].c.name = "t";
    ranks[q].c.shape = "[n]";
  }
}

TEST_P(LocalReducerConformance, EveryRankGathersTheExactSumRoundAfterRound) {
  for (int64_t count : {int64_t(1), int64_t(17), int64_t(1000), int64_t(4099)}) {
    const uint64_t key = 100 + static_cast<uint64_t>(count);
    for (uint32_t round = 0; round < 3; ++round) {
      std::vector<RankRound> ranks(L());
      std::vector<std::vector<float>> inputs;
      SetUpRanks(ranks, inputs, count, round, DataType::kFloat32);
      RunRound(reducers_, ranks, key, round, 1, /*distributed=*/false);
      for (int q = 0; q < L(); ++q) {
        ASSERT_EQ(ranks[q].step, RankRound::kDone) << "rank " << q << ": " << ranks[q].error.message();
        const float* out = reinterpret_cast<const float*>(ranks[q].output.data());
        for (int64_t i = 0; i < count; ++i) {
          ASSERT_EQ(out[i], Sum<float>(L(), i, round)) << "count " << count << " round " << round << " rank " << q
                                                      << " element " << i;
        }
      }
    }
  }
}

TEST_P(LocalReducerConformance, AverageDividesByTheGivenDivisor) {
  std::vector<RankRound> ranks(L());
  std::vector<std::vector<int32_t>> inputs;
  SetUpRanks(ranks, inputs, 333, 0, DataType::kInt32);
  // Every element's sum is a multiple of L * (L + 1) / 2 at round 0.
  const int64_t divisor = L() * (L() + 1) / 2;
  RunRound(reducers_, ranks, 9, 0, divisor, /*distributed=*/false);
  for (int q = 0; q < L(); ++q) {
    ASSERT_EQ(ranks[q].step, RankRound::kDone) << ranks[q].error.message();
    const int32_t* out = reinterpret_cast<const int32_t*>(ranks[q].output.data());
    for (int64_t i = 0; i < 333; ++i) ASSERT_EQ(out[i], Sum<int32_t>(L(), i, 0) / divisor) << i;
  }
}

// Across machines the owner's slice is sent from OwnSlice and the machines'
// sum lands back in it; the gather must hand out what landed there.
TEST_P(LocalReducerConformance, TheGatherHandsOutWhatTheCrossMachineStepLeftInTheOwnSlice) {
  std::vector<RankRound> ranks(L());
  std::vector<std::vector<float>> inputs;
  SetUpRanks(ranks, inputs, 2000, 0, DataType::kFloat32);
  RunRound(reducers_, ranks, 11, 0, 1, /*distributed=*/true, [](int, char* own, int64_t n) {
    float* f = reinterpret_cast<float*>(own);
    for (int64_t i = 0; i < n; ++i) f[i] *= 3;  // "three machines"
  });
  for (int q = 0; q < L(); ++q) {
    ASSERT_EQ(ranks[q].step, RankRound::kDone) << ranks[q].error.message();
    const float* out = reinterpret_cast<const float*>(ranks[q].output.data());
    for (int64_t i = 0; i < 2000; ++i) ASSERT_EQ(out[i], 3 * Sum<float>(L(), i, 0)) << i;
  }
}

TEST_P(LocalReducerConformance, RanksDisagreeingOnTheShapeAllFailNamingBothShapes) {
  std::vector<RankRound> ranks(L());
  std::vector<std::vector<float>> inputs;
  SetUpRanks(ranks, inputs, 64, 0, DataType::kFloat32);
  ranks[L() - 1].c.signature = 8;  // same bytes, another shape
  ranks[L() - 1].c.shape = "[8, 8]";
  RunRound(reducers_, ranks, 13, 0, 1, /*distributed=*/false);
  for (int q = 0; q < L(); ++q) {
    ASSERT_EQ(ranks[q].step, RankRound::kFailed) << "rank " << q << " did not fail";
    EXPECT_EQ(ranks[q].error.code(), StatusCode::kMismatch);
    EXPECT_NE(ranks[q].error.message().find("[8, 8]"), std::string::npos) << ranks[q].error.message();
    EXPECT_NE(ranks[q].error.message().find("[n]"), std::string::npos) << ranks[q].error.message();
  }
  // The next round of the key runs normally.
  SetUpRanks(ranks, inputs, 64, 1, DataType::kFloat32);
  RunRound(reducers_, ranks, 13, 1, 1, /*distributed=*/false);
  for (int q = 0; q < L(); ++q) ASSERT_EQ(ranks[q].step, RankRound::kDone) << ranks[q].error.message();
}

// A rank whose op failed before staging (e.g. its server connection broke)
// closes the round: the others fail with its reason and its code (a peer
// failure, not a mismatch) instead of waiting, and the next round runs.
TEST_P(LocalReducerConformance, ARoundClosedByAFailedRankFailsTheOthersAndTheNextRoundRuns) {
  std::vector<RankRound> ranks(L());
  std::vector<std::vector<float>> inputs;
  SetUpRanks(ranks, inputs, 500, 0, DataType::kFloat32);
  reducers_[0]->CloseFailedRound(nullptr, 21, 500 * sizeof(float), DataType::kFloat32, 0,
                                 Status::PeerFailure("rank 0 lost its server"), /*staged=*/false);
  ranks[0].step = RankRound::kDone;  // rank 0 is out of this round
  RunRound(reducers_, ranks, 21, 0, 1, /*distributed=*/false);
  for (int q = 1; q < L(); ++q) {
    ASSERT_EQ(ranks[q].step, RankRound::kFailed) << "rank " << q;
    EXPECT_EQ(ranks[q].error.code(), StatusCode::kPeerFailure) << ranks[q].error.message();
    EXPECT_NE(ranks[q].error.message().find("rank 0 lost its server"), std::string::npos) << ranks[q].error.message();
  }
  SetUpRanks(ranks, inputs, 500, 1, DataType::kFloat32);
  RunRound(reducers_, ranks, 21, 1, 1, /*distributed=*/false);
  for (int q = 0; q < L(); ++q) {
    ASSERT_EQ(ranks[q].step, RankRound::kDone) << ranks[q].error.message();
    const float* out = reinterpret_cast<const float*>(ranks[q].output.data());
    for (int64_t i = 0; i < 500; ++i) ASSERT_EQ(out[i], Sum<float>(L(), i, 1)) << i;
  }
}

TEST_P(LocalReducerConformance, AFailedRankIsReportedToTheOthersWithItsReason) {
  for (int q = 0; q < L(); ++q) EXPECT_TRUE(peers_[q]->CheckPeers(true).ok());
  peers_[L() - 1]->FailMachine("out of memory on the last rank");
  for (int q = 0; q < L() - 1; ++q) {
    Status st = peers_[q]->CheckPeers(false);
    EXPECT_EQ(st.code(), StatusCode::kPeerFailure);
    EXPECT_NE(st.message().find("out of memory on the last rank"), std::string::npos) << st.message();
  }
}

TEST_P(LocalReducerConformance, TheDoorbellWakesAWaitingRank) {
  const uint32_t seen = peers_[0]->Doorbell();
  std::thread ringer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    peers_[L() - 1]->Ring();
  });
  auto start = std::chrono::steady_clock::now();
  while (peers_[0]->Doorbell() == seen && std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    peers_[0]->WaitDoorbell(seen, 1000);
  }
  ringer.join();
  EXPECT_NE(peers_[0]->Doorbell(), seen) << "a ring by another local rank never reached rank 0";
}

INSTANTIATE_TEST_SUITE_P(Reducers, LocalReducerConformance,
                         ::testing::Values(Case{"shm", &CreateShmLocalReducer, 2}, Case{"shm", &CreateShmLocalReducer, 3},
                                           Case{"shm", &CreateShmLocalReducer, 4}),
                         CaseName);

}  // namespace
}  // namespace bps
