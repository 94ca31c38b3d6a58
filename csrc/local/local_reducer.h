// LocalReducer: the machine-local step of a push_pull. The local ranks of
// one machine reduce-scatter each partition (local rank q ends up with the
// sum of slice q, SliceOf(count, L, q)), the engine moves that slice across
// machines, and they all-gather it back. Every call is non-blocking: the
// engine thread polls the steps of many partitions in its scheduling order
// and sleeps on the reducer's doorbell when none moved.
//
// Rounds: the n-th push_pull of a key is round n on every local rank; a
// reducer serves a key's rounds in order. Errors that concern every local
// rank (disagreeing shapes, a full table) reach every rank's op of that round.
//
// Implementations: "shm" (POSIX shared memory between processes,
// csrc/local/shm_reducer.*). One generic suite, tests/cpp/
// local_reducer_conformance_test.cc, runs against every implementation.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "common/config.h"
#include "common/dtype.h"
#include "common/status.h"
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
};

enum class LocalProgress { kWaiting, kDone };

class LocalReducer {
 public:
  virtual ~LocalReducer() = default;
  virtual const char* name() const = 0;
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;

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

  // The machine's doorbell: rung whenever a step may have become possible.
  virtual uint32_t Doorbell() = 0;
  virtual void Ring() = 0;
  virtual void WaitDoorbell(uint32_t seen, int timeout_ms) = 0;
  // Whether another local rank failed (its reason) or, with
  // `check_alive`, died (checked only while this rank waits on them).
  virtual Status CheckPeers(bool check_alive) = 0;
  // This rank failed: the other local ranks learn `why` from CheckPeers.
  virtual void FailMachine(const std::string& why) = 0;
  // Leaves the machine's group (this rank no longer watched as alive).
  virtual void Leave() = 0;

  virtual uint64_t staging_bytes() = 0;
  virtual uint64_t keys_used() = 0;
};

// The reducer named `name` ("shm") for this rank, joined with the machine's
// other local ranks through `store` (after the job's rendezvous).
Status CreateLocalReducer(const std::string& name, const Config& config, Store* store,
                          std::unique_ptr<LocalReducer>* out);

}  // namespace bps
