// LocalReducer: the machine-local step of a push_pull. The local ranks of
// one machine reduce-scatter each partition (local rank q ends up with the
// sum of slice q, SliceOf(count, L, q)), the engine moves that slice across
// machines, and they all-gather it back. Every call is non-blocking: the
// engine thread polls the steps of many partitions in its scheduling order
// and sleeps on the machine's doorbell when none moved.
//
// This is the data path only. The machine's group of local ranks (the
// doorbell, liveness and failure, the order channel) is MachinePeers
// (machine_peers.h): the factories below make both, and the engine uses each
// through its own interface.
//
// Rounds: the n-th push_pull of a key is round n on every local rank; a
// reducer serves a key's rounds in order. Errors that concern every local
// rank (disagreeing shapes, a full table) reach every rank's op of that round.
//
// Implementations: "shm" (POSIX shared memory between processes, host
// tensors: csrc/local/shm_reducer.*) and the sequenced reducer over a
// collective library (csrc/local/sequenced_reducer.*): NCCL for device
// tensors (csrc/gpu/nccl_collectives.*), an in-process emulation in the C++
// tests. One generic suite, tests/cpp/local_reducer_conformance_test.cc, runs
// against every implementation.
//
// THE ORDERING RULE. A reducer whose steps are collectives (NCCL: a rank
// blocks inside a reduce-scatter until every peer issued the same one) must
// issue them in one sequence on every local rank of the machine, whatever
// order the framework submitted tensors in and whenever the network answers.
// Local rank 0 decides that sequence (CollectiveOrder, csrc/local/
// collective_order.h): every rank announces a step once it could issue it,
// rank 0 appends a step to the machine's order once every rank announced it,
// and every rank issues exactly that order, from its engine thread (Progress),
// and nothing else. A round that fails on one rank fails the same step on all
// (a failed decision), so no rank is left inside a collective its peers never
// issue. tests/cpp/collective_order_test.cc checks the rule on CPU.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <vector>

#include "common/config.h"
#include "common/dtype.h"
#include "common/partitioner.h"
#include "common/status.h"
#include "local/collectives.h"
#include "local/machine_peers.h"
#include "store/store.h"

namespace bps {

// A reducer's state of one partition key, opaque to the engine.
struct LocalPartition;

// What this rank brings to one round of one partition.
struct LocalContribution {
  const char* input = nullptr;  // the partition's first element in this rank's input
  int64_t count = 0;            // elements of the partition
  DataType dtype = DataType::kFloat32;
  uint64_t signature = 0;       // dtype and whole-tensor shape: the ranks must agree
  uint64_t tensor_bytes = 0;
  const char* name = "";        // the tensor's name and shape ("[10, 5]"), for errors
  const char* shape = "";
  // Where the partition's result goes (its first element in the output);
  // reducers that reduce in place into the output (NCCL) write there.
  char* output = nullptr;
  // The divisor of an average (the job's size), 1 for a sum: a reducer may
  // apply it while reducing (NCCL's pre-multiplied sum) instead of on the host.
  int64_t divisor = 1;
  // Device tensors: the CUDA device of input and output, and an event
  // recorded on the caller's stream at submission (a cudaEvent_t), which the
  // reducer's first step waits for. -1 / null for host tensors.
  int device = -1;
  void* ready_event = nullptr;
  // The engine's scheduling order of this partition: the machine's order of
  // collectives follows local rank 0's (highest priority first).
  int32_t priority = 0;
  uint64_t submit_seq = 0;
  uint32_t partition = 0;
  // This rank's push of the partition, compressed by the reducer where the
  // slice lives (collectives.h); null: the engine compresses the staging, if at all.
  SliceCompression* compression = nullptr;
};

enum class LocalProgress { kWaiting, kDone };

class LocalReducer {
 public:
  virtual ~LocalReducer() = default;
  virtual const char* name() const = 0;
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;

  // Geometry: how a tensor is cut into partitions and a partition into the
  // local ranks' slices. Every machine derives the same plan from the size
  // and the job's distinct local sizes alone (machines may differ, issue
  // 29), so the servers see the same network slices. NCCL wants equal slices.
  virtual std::vector<Range> PlanPartitions(int64_t count, int64_t elem_size, int64_t partition_bytes,
                                            int num_servers, const std::vector<int>& job_local_sizes) const {
    return bps::PlanPartitions(count, elem_size, partition_bytes, NetworkSliceStride(job_local_sizes), num_servers);
  }
  // Slice q of a partition on a machine of L local ranks (this machine's or
  // another's: the network slices refine every machine's slices).
  virtual Range SliceOfLayout(int64_t count, int L, int q) const { return bps::SliceOf(count, L, q); }
  Range SliceOf(int64_t count, int q) const { return SliceOfLayout(count, local_size(), q); }

  // Issues whatever steps the machine's order allows now (the ordering rule
  // above); called once per pass of the engine thread. True when anything
  // moved. Reducers without collectives have nothing to issue.
  virtual bool Progress() { return false; }
  // Whether no step of this rank's round of `p` is still running or may
  // still be decided: a failed op's buffers are handed back only then.
  virtual bool Settled(LocalPartition* p, uint32_t round) { return true; }

  // One machine, device tensors: the whole tensor reduced in one fused
  // collective, issued now on the calling thread (every local rank submits
  // in one order, as for NCCL itself) and ordered before whatever the caller
  // queues next on `stream`: its result is stream-ordered when this returns.
  // *out is polled through Gather (and released) like a partition.
  virtual bool fuses_one_machine() const { return false; }
  virtual Status LaunchFused(const LocalContribution& c, void* stream, LocalPartition** out) {
    return Status::Invalid(std::string("the '") + name() + "' reducer has no fused one-machine path");
  }
  // Device tensors: an event recorded now on `stream` (the caller's), for
  // LocalContribution::ready_event; returned once the op completed.
  virtual Status RecordReady(void* stream, void** event) {
    return Status::Invalid(std::string("the '") + name() + "' reducer takes no device tensors");
  }
  virtual void ReturnReady(void* event) {}
  // Device tensors across machines: work queued on `stream` (the caller's
  // result stream) after this returns waits on the device until
  // ReleaseHold(*hold), which the engine calls once the result is in the
  // output (or the op failed): the caller completes its future at once.
  virtual Status HoldStream(void* stream, void** hold) {
    return Status::Invalid(std::string("the '") + name() + "' reducer cannot hold a stream");
  }
  virtual void ReleaseHold(void* hold) {}
  // Compression where the slice lives (collectives.h, SliceCompression).
  virtual bool CompressesSlices(const CodecHeader& push) const { return false; }
  virtual void ForgetCompression(SliceCompression* c) {}

  // The state of partition `key` (`bytes` on this rank; the size may change
  // between rounds when every rank's does), held by this rank until
  // ReleasePartition. OK with *out null: no state is free now (all in use by
  // operations in flight); call again later. An error names the cause; with
  // *out set, FailRound tells the other ranks.
  virtual Status Acquire(uint64_t key, uint64_t bytes, DataType dtype, LocalPartition** out) = 0;
  // This rank's round of `p` ended (done or closed): the reducer may reclaim
  // the state once no rank holds it.
  virtual void ReleasePartition(LocalPartition* p) {}

  // 1. Hands this rank's contribution to the other local ranks. kWaiting:
  // they still gather the previous round.
  virtual LocalProgress StageIn(LocalPartition* p, uint32_t round, const LocalContribution& c) = 0;
  // 2. Once every rank staged: sums slice local_rank() over the local ranks
  // into OwnSlice(), and, if `also_into` is set, into it divided by
  // `divisor`. An error (ranks disagreeing on shape, size or dtype: it names
  // both ranks) fails the round on every rank.
  virtual Status ReduceOwnSlice(LocalPartition* p, uint32_t round, const LocalContribution& c, char* also_into,
                                int64_t divisor, LocalProgress* progress) = 0;
  // This rank's reduced slice: the cross-machine step sends it from here and
  // receives the machines' sum back into it.
  virtual char* OwnSlice(LocalPartition* p, const LocalContribution& c) = 0;
  // 3. The own slice is final for this round: the others may gather it.
  virtual void PublishOwnSlice(LocalPartition* p, uint32_t round) = 0;
  // 4. Copies every published slice into `output` (the partition's first
  // element), divided by `divisor`; `gathered` (one bit per local rank)
  // carries what was copied between calls. kDone once all were.
  virtual Status Gather(LocalPartition* p, uint32_t round, const LocalContribution& c, char* output, int64_t divisor,
                        uint32_t* gathered, LocalProgress* progress) = 0;
  // A failed op closes its round of `key` on this rank (p may be null: found
  // by key): the other ranks' op of that round fails with `why` (its code
  // kept: a peer failure is not a mismatch) unless one already failed it,
  // and the next round may start.
  virtual void CloseFailedRound(LocalPartition* p, uint64_t key, uint64_t bytes, DataType dtype, uint32_t round,
                                const Status& why, bool staged) = 0;
  // Fails round `round` of `p` for every local rank now (e.g. disagreeing sizes).
  virtual void FailRound(LocalPartition* p, uint32_t round, const Status& why) = 0;
  // "2 of 4 local ranks staged": for the watchdog's message.
  virtual std::string DescribeStaging(LocalPartition* p, uint32_t round) = 0;

  virtual uint64_t staging_bytes() = 0;
  // Staging memory held, in use or pooled warm for the next key (>= staging_bytes),
  // and the part of it kept ahead of need (shm: BYTEPS_LOCAL_STAGING_RESERVE).
  virtual uint64_t staging_backed_bytes() { return staging_bytes(); }
  virtual uint64_t staging_reserve_bytes() { return 0; }
  virtual uint64_t keys_used() = 0;
};

// Host tensors' reducer for this rank and the machine's group it joined.
struct HostReducer {
  std::unique_ptr<LocalReducer> reducer;
  std::unique_ptr<MachinePeers> peers;
};
// Host tensors' reducer for this rank, joined with the machine's other local
// ranks through `store` (after the job's rendezvous): EngineOptions takes one.
using HostReducerFactory = Status (*)(const Config& config, Store* store, HostReducer* out);
// POSIX shared memory between the machine's processes (shm_reducer.h,
// shm_machine_peers.h).
Status CreateShmLocalReducer(const Config& config, Store* store, HostReducer* out);

// What a device reducer shares with the machine's host reducer: the order
// channel in its shared control segment (null with one local rank) and the
// engines' doorbells. `ring` wakes every local rank's engine: the order
// channel's announcements and a broken machine concern them all.
// `ring_self` wakes this rank's only: a step on this rank's streams finished,
// which no other engine waits for (a ring per CUDA host function woke every
// local rank's engine, issue 38).
struct MachineLink {
  CollectiveOrderShm* order = nullptr;
  std::function<void()> ring;
  std::function<void()> ring_self;
};

// Device tensors' reducer and how its collectives fail: one object (the
// sequenced reducer), seen through both interfaces.
struct DeviceReducer {
  std::shared_ptr<LocalReducer> reducer;
  std::shared_ptr<PeerLiveness> liveness;
};

// Device tensors' reducer, made when a rank first submits one (its GPU is
// known then); a collective among the machine's local ranks. The CUDA build
// registers NCCL's at load time (EngineOptions' default); the C++ tests pass
// an emulation to their engines; without one, device tensors are refused
// with a clear error.
using DeviceReducerFactory = Status (*)(const Config& config, Store* store, int device, const MachineLink& link,
                                        DeviceReducer* out);
void SetDeviceReducerFactory(DeviceReducerFactory factory);
DeviceReducerFactory GetDeviceReducerFactory();

}  // namespace bps
