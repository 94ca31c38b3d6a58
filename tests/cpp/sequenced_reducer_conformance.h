// The conformance suite of reducers whose machine-local steps are
// collectives (csrc/local/sequenced_reducer.h): one set of cases over any
// Collectives library, instantiated for the emulation in CI
// (sequenced_reducer_conformance_test.cc) and for NCCL on GPUs
// (gpu/nccl_reducer_test.cc). L local ranks are L reducers of one machine,
// each driven by its own thread as by its engine thread (Progress issues the
// machine's order), joined through real shared memory (the host reducer's
// order channel) and, for NCCL, a real communicator.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/dtype.h"
#include "device_memory.h"
#include "local/local_reducer.h"
#include "store/memory_store.h"

namespace bps {
namespace testing_support {

// A collective library under test: its device reducer and its memory.
struct CollectivesKit {
  std::string name;
  DeviceReducerFactory make;
  std::function<std::unique_ptr<DeviceMemory>()> memory;
  std::function<int()> max_local_size;  // how many distinct devices this host has for it
  // Whether nothing runs on `device` any more (no kernel left spinning),
  // within `seconds`.
  std::function<bool(int device, double seconds)> device_idle;
};

struct SequencedCase {
  CollectivesKit kit;
  int local_size;
};

inline std::string SequencedCaseName(const ::testing::TestParamInfo<SequencedCase>& info) {
  return info.param.kit.name + "_" + std::to_string(info.param.local_size) + "ranks";
}

// One rank's pass through a partition round, as the engine's stage table
// drives it on the engine thread.
struct RankRound {
  enum Result { kPending, kDone, kFailed, kHung } result = kPending;
  LocalContribution c;
  Status error;
  LocalPartition* p = nullptr;
};

// The servers' part for the rank owning `own` (host staging): may rewrite it.
using CrossMachineStep = std::function<void(int q, char* own, int64_t count, DataType dtype)>;

class SequencedReducerConformance : public ::testing::TestWithParam<SequencedCase> {
 protected:
  void SetUp() override {
    static std::atomic<int> groups{0};
    const int L = GetParam().local_size;
    if (GetParam().kit.max_local_size() < L) {
      GTEST_SKIP() << GetParam().kit.name << " needs " << L << " devices, this host has "
                   << GetParam().kit.max_local_size();
    }
    memory_ = GetParam().kit.memory();
    store_ = std::make_shared<MemoryStore>();
    hosts_.resize(L);
    reducers_.resize(L);
    liveness_.resize(L);
    rings_.reset(new std::atomic<int>[L]);
    for (int q = 0; q < L; ++q) rings_[q] = 0;
    const std::string job = "src" + std::to_string(getpid()) + "g" + std::to_string(groups++);
    std::vector<Status> results(L);
    std::vector<std::thread> joiners;
    for (int q = 0; q < L; ++q) {
      joiners.emplace_back([&, q] {
        Config c;
        c.local_rank = q;
        c.local_size = L;
        c.job_id = job;
        c.rendezvous_timeout_seconds = 30;
        c.timeout_seconds = 30;
        c.local_staging_reserve_bytes = 1 << 20;  // the order channel is all this suite uses of it
        MachineLink link;
        std::atomic<int>* rings = &rings_[q];
        if (L == 1) {
          // Alone on the machine, as the engine runs it: no host reducer, no
          // order channel (a rank's announcements are its decisions).
          link.ring = [rings] { rings->fetch_add(1); };
          link.ring_self = link.ring;
        } else {
          results[q] = CreateShmLocalReducer(c, store_.get(), &hosts_[q]);
          if (!results[q].ok()) return;
          link.order = hosts_[q].peers->order_channel();
          MachinePeers* host = hosts_[q].peers.get();
          link.ring = [rings, host] {
            rings->fetch_add(1);
            host->Ring();
          };
          link.ring_self = [rings, host] {
            rings->fetch_add(1);
            host->RingSelf();
          };
        }
        DeviceReducer made;
        results[q] = GetParam().kit.make(c, store_.get(), memory_->DeviceOf(q), link, &made);
        reducers_[q] = std::move(made.reducer);
        liveness_[q] = std::move(made.liveness);
      });
    }
    for (auto& t : joiners) t.join();
    for (int q = 0; q < L; ++q) ASSERT_TRUE(results[q].ok()) << "local rank " << q << ": " << results[q].message();
  }

  void TearDown() override {
    reducers_.clear();  // before the shared memory their order channel lives in
    liveness_.clear();
    hosts_.clear();
  }

  int L() const { return GetParam().local_size; }
  int Device(int q) const { return memory_->DeviceOf(q); }

  // Every rank's round of `key` on its own thread: stage, reduce-scatter,
  // the cross-machine step on the own slice, all-gather; a failed round is
  // closed and waited until settled, as the engine does.
  void RunRound(std::vector<RankRound>& ranks, uint64_t key, uint32_t round, const CrossMachineStep& cross,
                double seconds = 20, const std::vector<bool>& skip = {}) {
    std::vector<std::thread> threads;
    for (int q = 0; q < L(); ++q) {
      if (!skip.empty() && skip[q]) continue;
      threads.emplace_back([&, q] { DriveRank(q, ranks[q], key, round, cross, seconds); });
    }
    for (auto& t : threads) t.join();
  }

  void DriveRank(int q, RankRound& rr, uint64_t key, uint32_t round, const CrossMachineStep& cross, double seconds) {
    LocalReducer& r = *reducers_[q];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    const uint64_t bytes = static_cast<uint64_t>(rr.c.count) * DataTypeSize(rr.c.dtype);
    auto fail = [&](const Status& st) {
      rr.error = st;
      rr.result = RankRound::kFailed;
      r.CloseFailedRound(rr.p, key, bytes, rr.c.dtype, round, st, /*staged=*/true);
      while (!r.Settled(rr.p, round) && std::chrono::steady_clock::now() < deadline) {
        r.Progress();
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      if (!r.Settled(rr.p, round)) rr.result = RankRound::kHung;
      r.ReleasePartition(rr.p);
    };
    Status st = r.Acquire(key, bytes, rr.c.dtype, &rr.p);
    if (!st.ok() || !rr.p) {
      rr.error = st;
      rr.result = RankRound::kFailed;
      return;
    }
    while (r.StageIn(rr.p, round, rr.c) != LocalProgress::kDone) {
      if (std::chrono::steady_clock::now() > deadline) {
        rr.result = RankRound::kHung;
        return;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    LocalProgress progress = LocalProgress::kWaiting;
    for (;;) {
      r.Progress();
      st = r.ReduceOwnSlice(rr.p, round, rr.c, nullptr, rr.c.divisor, &progress);
      if (!st.ok()) return fail(st);
      if (progress == LocalProgress::kDone) break;
      if (std::chrono::steady_clock::now() > deadline) {
        rr.result = RankRound::kHung;
        return;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    const Range own = r.SliceOf(rr.c.count, q);
    if (cross && own.count > 0) cross(q, r.OwnSlice(rr.p, rr.c), own.count, rr.c.dtype);
    r.PublishOwnSlice(rr.p, round);
    uint32_t gathered = 0;
    for (;;) {
      r.Progress();
      st = r.Gather(rr.p, round, rr.c, rr.c.output, rr.c.divisor, &gathered, &progress);
      if (!st.ok()) return fail(st);
      if (progress == LocalProgress::kDone) break;
      if (std::chrono::steady_clock::now() > deadline) {
        rr.result = RankRound::kHung;
        return;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    rr.result = RankRound::kDone;
    r.ReleasePartition(rr.p);
  }

  // Rank q's input: (q + 1) * (i % 5 + 1) + round, exact in every dtype used.
  template <typename T>
  static std::vector<T> Input(int q, int64_t count, uint32_t round) {
    std::vector<T> v(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) v[i] = static_cast<T>((q + 1) * (i % 5 + 1) + round);
    return v;
  }
  double Sum(int64_t i, uint32_t round) const {
    double s = 0;
    for (int q = 0; q < L(); ++q) s += (q + 1) * (i % 5 + 1) + round;
    return s;
  }

  // Device buffers holding every rank's input and output of one round.
  template <typename T>
  void SetUpRanks(std::vector<RankRound>& ranks, int64_t count, uint32_t round, DataType dtype, int64_t divisor = 1) {
    ranks.assign(L(), RankRound());
    for (int q = 0; q < L(); ++q) {
      buffers_.emplace_back(new DeviceBuffer(*memory_, Device(q), static_cast<size_t>(count) * sizeof(T)));
      DeviceBuffer& in = *buffers_.back();
      std::vector<T> v = Input<T>(q, count, round);
      in.Write(v.data(), v.size());
      buffers_.emplace_back(new DeviceBuffer(*memory_, Device(q), static_cast<size_t>(count) * sizeof(T)));
      DeviceBuffer& out = *buffers_.back();
      LocalContribution& c = ranks[q].c;
      c.input = in.bytes();
      c.output = out.bytes();
      c.count = count;
      c.dtype = dtype;
      c.signature = 7;
      c.tensor_bytes = static_cast<uint64_t>(count) * sizeof(T);
      c.name = "t";
      c.shape = "[n]";
      c.divisor = divisor;
      c.device = Device(q);
      outputs_[q] = &out;
    }
  }
  // Every rank's round completed and its output holds `factor` x the sum.
  void ExpectExactSums(const std::vector<RankRound>& ranks, int64_t count, uint32_t round, double factor = 1) {
    for (int q = 0; q < L(); ++q) {
      ASSERT_EQ(ranks[q].result, RankRound::kDone) << "rank " << q << ": " << ranks[q].error.message();
      std::vector<float> out = Output<float>(q, count);
      for (int64_t i = 0; i < count; ++i) {
        ASSERT_EQ(out[i], factor * Sum(i, round)) << "count " << count << " round " << round << " rank " << q
                                                  << " element " << i;
      }
    }
  }
  template <typename T>
  std::vector<T> Output(int q, int64_t count) {
    std::vector<T> v(static_cast<size_t>(count));
    outputs_[q]->Read(v.data(), v.size());
    return v;
  }

  std::unique_ptr<DeviceMemory> memory_;
  std::shared_ptr<MemoryStore> store_;
  std::vector<HostReducer> hosts_;                       // shared memory: the order channel
  std::vector<std::shared_ptr<LocalReducer>> reducers_;  // under test
  std::vector<std::shared_ptr<PeerLiveness>> liveness_;  // the same reducers' failure side
  std::unique_ptr<std::atomic<int>[]> rings_;            // the engine's doorbell rung by rank q's reducer
  std::vector<std::unique_ptr<DeviceBuffer>> buffers_;
  std::map<int, DeviceBuffer*> outputs_;
};

template <typename T>
void Scale(char* own, int64_t count, T factor) {
  T* v = reinterpret_cast<T*>(own);
  for (int64_t i = 0; i < count; ++i) v[i] *= factor;
}

// "Three machines": the servers' answer is three times this machine's share.
inline void ThreeMachines(int, char* own, int64_t count, DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return Scale<float>(own, count, 3);
    case DataType::kFloat64: return Scale<double>(own, count, 3);
    case DataType::kInt32: return Scale<int32_t>(own, count, 3);
    default: FAIL() << "no scaling for " << DataTypeName(dtype);
  }
}

TEST_P(SequencedReducerConformance, EveryRankGathersTheExactSumRoundAfterRoundAndTheDoorbellRings) {
  // 1: smaller than the ranks' slices; 4099, 300001: padded equal slices.
  for (int64_t count : {int64_t(1), int64_t(17), int64_t(1000), int64_t(4099), int64_t(300001)}) {
    const uint64_t key = 100 + static_cast<uint64_t>(count);
    for (uint32_t round = 0; round < 3; ++round) {
      std::vector<RankRound> ranks;
      SetUpRanks<float>(ranks, count, round, DataType::kFloat32);
      RunRound(ranks, key, round, ThreeMachines);
      ASSERT_NO_FATAL_FAILURE(ExpectExactSums(ranks, count, round, 3));
    }
  }
  for (int q = 0; q < L(); ++q) EXPECT_GT(rings_[q].load(), 0) << "rank " << q << "'s reducer never rang the engine";
}

TEST_P(SequencedReducerConformance, IntegerAndDoubleSumsAreExact) {
  std::vector<RankRound> ranks;
  SetUpRanks<int32_t>(ranks, 4099, 0, DataType::kInt32);
  RunRound(ranks, 201, 0, ThreeMachines);
  for (int q = 0; q < L(); ++q) {
    ASSERT_EQ(ranks[q].result, RankRound::kDone) << ranks[q].error.message();
    std::vector<int32_t> out = Output<int32_t>(q, 4099);
    for (int64_t i = 0; i < 4099; ++i) ASSERT_EQ(out[i], 3 * Sum(i, 0)) << "rank " << q << " element " << i;
  }
  SetUpRanks<double>(ranks, 999, 0, DataType::kFloat64);
  RunRound(ranks, 202, 0, ThreeMachines);
  for (int q = 0; q < L(); ++q) {
    ASSERT_EQ(ranks[q].result, RankRound::kDone) << ranks[q].error.message();
    std::vector<double> out = Output<double>(q, 999);
    for (int64_t i = 0; i < 999; ++i) ASSERT_EQ(out[i], 3 * Sum(i, 0)) << "rank " << q << " element " << i;
  }
}

// An average is divided once: on the device (NCCL's pre-multiplied sum) or
// on the host, never both and never not.
TEST_P(SequencedReducerConformance, AveragesAreDividedExactlyOnce) {
  std::vector<RankRound> ranks;
  SetUpRanks<float>(ranks, 5001, 0, DataType::kFloat32, /*divisor=*/4);  // a power of two: exact
  RunRound(ranks, 301, 0, nullptr);
  for (int q = 0; q < L(); ++q) {
    ASSERT_EQ(ranks[q].result, RankRound::kDone) << ranks[q].error.message();
    std::vector<float> out = Output<float>(q, 5001);
    for (int64_t i = 0; i < 5001; ++i) ASSERT_EQ(out[i], Sum(i, 0) / 4) << "rank " << q << " element " << i;
  }
  // Every element's sum is a multiple of L * (L + 1) / 2 at round 0.
  const int64_t divisor = L() * (L() + 1) / 2;
  SetUpRanks<int32_t>(ranks, 333, 0, DataType::kInt32, divisor);
  RunRound(ranks, 302, 0, nullptr);
  for (int q = 0; q < L(); ++q) {
    ASSERT_EQ(ranks[q].result, RankRound::kDone) << ranks[q].error.message();
    std::vector<int32_t> out = Output<int32_t>(q, 333);
    for (int64_t i = 0; i < 333; ++i) ASSERT_EQ(out[i], Sum(i, 0) / divisor) << "rank " << q << " element " << i;
  }
}

TEST_P(SequencedReducerConformance, RanksDisagreeingOnTheShapeAllFailNamingBothShapesAndTheNextRoundRuns) {
  if (L() < 2) GTEST_SKIP() << "needs a second local rank";
  std::vector<RankRound> ranks;
  SetUpRanks<float>(ranks, 64, 0, DataType::kFloat32);
  ranks[L() - 1].c.signature = 8;  // same bytes, another shape
  ranks[L() - 1].c.shape = "[8, 8]";
  RunRound(ranks, 13, 0, nullptr);
  for (int q = 0; q < L(); ++q) {
    ASSERT_EQ(ranks[q].result, RankRound::kFailed) << "rank " << q << " did not fail";
    EXPECT_EQ(ranks[q].error.code(), StatusCode::kMismatch) << ranks[q].error.message();
    EXPECT_NE(ranks[q].error.message().find("[8, 8]"), std::string::npos) << ranks[q].error.message();
    EXPECT_NE(ranks[q].error.message().find("[n]"), std::string::npos) << ranks[q].error.message();
  }
  SetUpRanks<float>(ranks, 64, 1, DataType::kFloat32);
  RunRound(ranks, 13, 1, nullptr);
  ASSERT_NO_FATAL_FAILURE(ExpectExactSums(ranks, 64, 1));
}

// A rank whose op failed before staging (its server connection broke, say)
// closes the round: no collective of it is issued, the others fail with its
// reason and code, and the next round runs.
TEST_P(SequencedReducerConformance, ARoundClosedByAFailedRankFailsTheOthersAndTheNextRoundRuns) {
  if (L() < 2) GTEST_SKIP() << "needs a second local rank";
  std::vector<RankRound> ranks;
  SetUpRanks<float>(ranks, 500, 0, DataType::kFloat32);
  reducers_[0]->CloseFailedRound(nullptr, 21, 500 * sizeof(float), DataType::kFloat32, 0,
                                 Status::PeerFailure("rank 0 lost its server"), /*staged=*/false);
  std::vector<bool> skip(L(), false);
  skip[0] = true;
  std::atomic<bool> others_done{false};
  std::thread rank0_engine([&] {  // rank 0's engine thread goes on issuing the machine's order
    while (!others_done) {
      reducers_[0]->Progress();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  RunRound(ranks, 21, 0, nullptr, 20, skip);
  others_done = true;
  rank0_engine.join();
  for (int q = 1; q < L(); ++q) {
    ASSERT_EQ(ranks[q].result, RankRound::kFailed) << "rank " << q;
    EXPECT_EQ(ranks[q].error.code(), StatusCode::kPeerFailure) << ranks[q].error.message();
    EXPECT_NE(ranks[q].error.message().find("rank 0 lost its server"), std::string::npos) << ranks[q].error.message();
  }
  SetUpRanks<float>(ranks, 500, 1, DataType::kFloat32);
  RunRound(ranks, 21, 1, nullptr);
  ASSERT_NO_FATAL_FAILURE(ExpectExactSums(ranks, 500, 1));
}

// The last local rank dies after its peers issued a reduce-scatter with it:
// they wait inside the collective (on a GPU: spinning in NCCL's kernel)
// until the job's failure aborts the communicator; then their step ends
// (done with garbage or an error, both fine: the op has failed) instead of
// waiting forever, and the round settles: no rank is left inside it.
TEST_P(SequencedReducerConformance, AbortEndsTheCollectivesOfRanksWaitingForADeadPeer) {
  if (L() < 2) GTEST_SKIP() << "needs a second local rank";
  std::vector<RankRound> ranks;
  SetUpRanks<float>(ranks, 100000, 0, DataType::kFloat32);
  const int dead = L() - 1;
  std::vector<LocalPartition*> parts(L(), nullptr);
  for (int q = 0; q < L(); ++q) {
    ASSERT_TRUE(reducers_[q]->Acquire(31, 400000, DataType::kFloat32, &parts[q]).ok());
    ASSERT_EQ(reducers_[q]->StageIn(parts[q], 0, ranks[q].c), LocalProgress::kDone);
  }
  // The survivors' engine threads issue the machine's order; the dead rank's never runs again.
  std::vector<std::thread> engines;
  std::vector<std::string> waits(L());
  std::vector<std::string> early(L());
  std::vector<bool> ended(L(), false);
  std::atomic<int> issued{0};
  std::atomic<bool> aborted{false};
  for (int q = 0; q < dead; ++q) {
    engines.emplace_back([&, q] {
      LocalReducer& r = *reducers_[q];
      bool counted = false;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (std::chrono::steady_clock::now() < deadline) {
        const bool after_abort = aborted.load();
        r.Progress();
        LocalProgress progress = LocalProgress::kWaiting;
        Status st = r.ReduceOwnSlice(parts[q], 0, ranks[q].c, nullptr, 1, &progress);
        const bool over = !st.ok() || progress == LocalProgress::kDone;
        if (!after_abort && over) {
          early[q] = st.ok() ? "the reduce-scatter finished without the dead rank" : st.message();
          return;
        }
        if (after_abort && over) {
          ended[q] = r.Settled(parts[q], 0);
          return;
        }
        if (!after_abort) {
          waits[q] = r.DescribeStaging(parts[q], 0);
          if (!counted && waits[q].find("issued") != std::string::npos) {
            counted = true;
            issued++;
          }
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
  }
  const auto start = std::chrono::steady_clock::now();
  while (issued < dead && std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // inside the collective, waiting
  aborted = true;
  for (int q = 0; q < dead; ++q) liveness_[q]->FailMachine("local rank " + std::to_string(dead) + " died");
  for (auto& t : engines) t.join();
  for (int q = 0; q < dead; ++q) {
    EXPECT_EQ(early[q], "") << "rank " << q;
    EXPECT_NE(waits[q].find("reduce-scatter is issued"), std::string::npos)
        << "rank " << q << " was not inside the collective before the abort: " << waits[q];
    EXPECT_TRUE(ended[q]) << "rank " << q << "'s reduce-scatter still waits 20 s after the abort";
    EXPECT_TRUE(GetParam().kit.device_idle(Device(q), 10)) << "rank " << q << "'s device still runs its collective";
  }
  for (int q = 0; q < dead; ++q) reducers_[q]->ReleasePartition(parts[q]);
}

// One machine: the whole tensor in one fused all-reduce per rank, issued
// in one order on every rank, the average (over the job: L) applied once.
TEST_P(SequencedReducerConformance, TheFusedAllReduceAveragesOnce) {
  ASSERT_TRUE(reducers_[0]->fuses_one_machine());
  std::vector<RankRound> ranks;
  SetUpRanks<float>(ranks, 300001, 0, DataType::kFloat32, /*divisor=*/L());
  std::vector<std::thread> threads;
  std::vector<Status> results(L());
  for (int q = 0; q < L(); ++q) {
    threads.emplace_back([&, q] {
      LocalReducer& r = *reducers_[q];
      LocalPartition* p = nullptr;
      results[q] = r.LaunchFused(ranks[q].c, nullptr, &p);
      if (!results[q].ok()) return;
      uint32_t gathered = 0;
      LocalProgress progress = LocalProgress::kWaiting;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (progress != LocalProgress::kDone && results[q].ok()) {
        results[q] = r.Gather(p, 0, ranks[q].c, ranks[q].c.output, L(), &gathered, &progress);
        if (std::chrono::steady_clock::now() > deadline) results[q] = Status::Internal("hung");
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      r.ReleasePartition(p);
    });
  }
  for (auto& t : threads) t.join();
  for (int q = 0; q < L(); ++q) {
    ASSERT_TRUE(results[q].ok()) << "rank " << q << ": " << results[q].message();
    std::vector<float> out = Output<float>(q, 300001);
    // Over 3 ranks the quotient is not a float32: a few units in the last place.
    for (int64_t i = 0; i < 300001; ++i) {
      ASSERT_NEAR(out[i], Sum(i, 0) / L(), 4e-7 * Sum(i, 0) / L()) << "rank " << q << " element " << i;
    }
  }
}

}  // namespace testing_support
}  // namespace bps
