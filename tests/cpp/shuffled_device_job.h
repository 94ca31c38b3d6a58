// The device-tensor workload of the ordering rule's engine tests
// (csrc/local/local_reducer.h), written once for both collective libraries:
// every rank of an in-process job submits rounds of a few device tensors,
// each rank in its own random order with random pauses, and the results are
// checked exactly. Over the emulated collectives (collective_order_test.cc,
// CI) and over NCCL on GPUs (gpu/nccl_engine_test.cc).
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "device_memory.h"
#include "in_process_job.h"

namespace bps {
namespace testing_support {

struct DeviceTensorCase {
  std::string name;
  int64_t count;
  DataType dtype;  // kFloat32 or kInt32
  ReduceOp reduce_op;
  int32_t priority;
};

inline const std::vector<DeviceTensorCase>& ShuffledTensors() {
  static const std::vector<DeviceTensorCase> tensors = {
      {"layer0.weight", 5000, DataType::kFloat32, ReduceOp::kSum, 0},    // several partitions of 4 KB
      {"layer0.bias", 3001, DataType::kFloat32, ReduceOp::kAverage, 0},  // odd: padded slices
      {"layer1.weight", 2048, DataType::kInt32, ReduceOp::kSum, 0},
      {"layer1.bias", 7, DataType::kFloat32, ReduceOp::kSum, 0},         // smaller than the local ranks' slices
      {"embedding", 9000, DataType::kFloat32, ReduceOp::kAverage, 0},
  };
  return tensors;
}

// Rank r's element i in round k: exact in float32 and int32 for every sum.
inline double ShuffledValue(int rank, int64_t i, int round) { return (rank + 1) * (i % 7 + 1) + round; }

struct ShuffledOutcome {
  int completed = 0;
  int failed = 0;
  int64_t wrong = 0;
  bool hung = false;
  std::string first_error;
  std::string first_wrong;
  bool result_streams_drained = true;  // stream-ordered runs: every hold was released
};

enum class SubmitOrder {
  kShuffled,  // each rank its own random order (across machines: any order is allowed)
  kSame,      // one order on every rank (one machine's fused path needs it, as NCCL itself)
};

// Every rank submits `rounds` rounds of ShuffledTensors() as device tensors
// in `memory`, with pauses of up to 2 ms; then waits for all of them.
// `stream_ordered`: each result is asked for on the memory's result stream
// (the caller completes at once; done only confirms).
inline ShuffledOutcome RunShuffled(InProcessJob& job, DeviceMemory& memory, uint32_t seed, bool distinct_priorities,
                                   SubmitOrder order = SubmitOrder::kShuffled, int rounds = 3,
                                   bool stream_ordered = false) {
  const int world = job.size();
  const auto& tensors = ShuffledTensors();
  struct Slot {
    std::unique_ptr<DeviceBuffer> in, out;
    Completion done;
  };
  std::vector<std::vector<std::unique_ptr<Slot>>> slots(world);
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r) {
    slots[r].resize(rounds * tensors.size());
    ranks.emplace_back([&, r] {
      const int device = memory.DeviceOf(r);
      std::mt19937 rng(seed * 7919u + static_cast<uint32_t>(order == SubmitOrder::kSame ? 0 : r));
      std::mt19937 pauses(seed * 104729u + static_cast<uint32_t>(r));
      for (int round = 0; round < rounds; ++round) {
        std::vector<size_t> sequence(tensors.size());
        for (size_t k = 0; k < sequence.size(); ++k) sequence[k] = k;
        std::shuffle(sequence.begin(), sequence.end(), rng);
        for (size_t k : sequence) {
          const DeviceTensorCase& tc = tensors[k];
          auto slot = std::make_unique<Slot>();
          const size_t bytes = static_cast<size_t>(tc.count) * 4;
          slot->in.reset(new DeviceBuffer(memory, device, bytes));
          slot->out.reset(new DeviceBuffer(memory, device, bytes));
          if (tc.dtype == DataType::kFloat32) {
            std::vector<float> v(tc.count);
            for (int64_t i = 0; i < tc.count; ++i) v[i] = static_cast<float>(ShuffledValue(r, i, round));
            slot->in->Write(v.data(), v.size());
          } else {
            std::vector<int32_t> v(tc.count);
            for (int64_t i = 0; i < tc.count; ++i) v[i] = static_cast<int32_t>(ShuffledValue(r, i, round));
            slot->in->Write(v.data(), v.size());
          }
          TensorView t{};
          t.data = slot->in->data();
          t.dtype = static_cast<int32_t>(tc.dtype);
          t.num_elements = tc.count;
          t.device = device;
          const int32_t priority = distinct_priorities ? -static_cast<int32_t>(k) : tc.priority;
          Status st = job.rank(r).Submit(t, slot->out->data(), tc.name, priority, tc.reduce_op, Completion::Callback,
                                         &slot->done, nullptr,
                                         stream_ordered ? memory.ResultStream(device) : nullptr);
          if (!st.ok()) Completion::Callback(&slot->done, static_cast<int>(st.code()), st.message().c_str());
          slots[r][round * tensors.size() + k] = std::move(slot);
          std::this_thread::sleep_for(std::chrono::microseconds(pauses() % 2000));
        }
      }
    });
  }
  for (auto& t : ranks) t.join();
  ShuffledOutcome outcome;
  for (int r = 0; r < world; ++r) {
    for (int round = 0; round < rounds; ++round) {
      for (size_t k = 0; k < tensors.size(); ++k) {
        Slot& slot = *slots[r][round * tensors.size() + k];
        if (!slot.done.Wait(30)) {
          outcome.hung = true;
          continue;
        }
        if (slot.done.code != StatusCode::kOk) {
          outcome.failed++;
          if (outcome.first_error.empty()) outcome.first_error = slot.done.message;
          continue;
        }
        outcome.completed++;
        const DeviceTensorCase& tc = tensors[k];
        const bool average = tc.reduce_op == ReduceOp::kAverage;
        std::vector<float> f;
        std::vector<int32_t> n;
        if (tc.dtype == DataType::kFloat32) {
          f.resize(tc.count);
          slot.out->Read(f.data(), f.size());
        } else {
          n.resize(tc.count);
          slot.out->Read(n.data(), n.size());
        }
        for (int64_t i = 0; i < tc.count; ++i) {
          double sum = 0;
          for (int q = 0; q < world; ++q) sum += ShuffledValue(q, i, round);
          const double want = average ? sum / world : sum;
          const double got = tc.dtype == DataType::kFloat32 ? f[i] : n[i];
          // Sums are exact. An average over 3 ranks is not a float32: NCCL
          // pre-multiplies each contribution by 1/3 and the machines' shares
          // are added in any order, so it may differ from the correctly
          // rounded quotient by a few units in the last place.
          const bool ok = tc.dtype != DataType::kFloat32 ? n[i] == static_cast<int32_t>(want)
                          : average             ? std::abs(f[i] - want) <= 4e-7 * std::abs(want)
                                                : f[i] == static_cast<float>(want);
          if (!ok && outcome.wrong++ == 0) {
            outcome.first_wrong = "rank " + std::to_string(r) + " round " + std::to_string(round) + " '" + tc.name +
                                  "' element " + std::to_string(i) + ": " + std::to_string(got) + ", want " +
                                  std::to_string(want);
          }
        }
      }
    }
  }
  if (stream_ordered) outcome.result_streams_drained = memory.ResultStreamsDrained(10);
  return outcome;
}

}  // namespace testing_support
}  // namespace bps
