// A machine's collective library as the sequenced reducer drives it: NCCL
// on GPUs (csrc/gpu/nccl_collectives.*), an in-process emulation on CPU in
// the C++ tests (tests/cpp/emulated_collectives.*). Every call is
// asynchronous: it queues work and returns; Poll says when a step's work is
// complete, and the library rings the engine's doorbell then (a CUDA host
// function), so the engine thread never blocks on the device.
//
// A partition round's work, in this order:
//   ReduceScatter  (machine order) wait for the caller's ready event; reduce
//                  the partition so this rank's slice holds the machine's sum
//                  (pre-multiplied by 1/divisor for floating-point averages),
//                  then copy the slice into host staging for the network
//   Upload         (any order) the network's answer from staging into the slice
//   AllGather      (machine order) every slice into every rank's output
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"
#include "compression/compressor.h"

namespace bps {

enum class CollectivePhase { kReduced, kGathered };

// A push compressed where its slice lives (issue 39): the library encodes
// its reduced slice into `push` (CompressedBytes(push) bytes, header
// included) and copies only that payload into staging; the answer arrives in
// staging as `answer` and the library expands it into the slice. The same
// wire format as the host codecs (compressor.h), with the same key and
// round, so machines compressing on the host and on the device interoperate.
// Owned by the engine per network key and kept across rounds; `state` is the
// library's (error-feedback residual, momentum and payload buffers in device
// memory), freed by Collectives::ForgetCompression.
struct SliceCompression {
  CodecHeader push;
  CodecHeader answer;
  std::vector<uint32_t> cuts;  // onebit's segment boundaries (push.cuts of them)
  uint64_t key = 0;            // the network key
  bool error_feedback = false;
  bool momentum = false;
  float mu = 0;
  bool nesterov = true;
  void* state = nullptr;
};

// The buffers of one partition round. `slice` elements per rank (equal,
// NCCL's rule): the partition padded up to local_size * slice elements when
// `count` is not a multiple (the library then works in scratch memory).
struct CollectiveWork {
  const char* input = nullptr;   // device: the partition's first element
  char* output = nullptr;        // device
  int64_t count = 0;             // elements of the partition
  int64_t slice = 0;             // elements per local rank
  int64_t own_count = 0;         // this rank's real elements (<= slice; the tail's may be fewer)
  DataType dtype = DataType::kFloat32;
  int64_t divisor = 1;           // average: the job's size
  void* ready_event = nullptr;   // the caller's stream at submission
  char* staging = nullptr;       // host (pinned): this rank's slice for the network
  void* state = nullptr;         // the library's (events, scratch)
  uint64_t key = 0;              // the partition key and round, for diagnostics
  uint32_t round = 0;
  SliceCompression* compression = nullptr;  // null: the slice goes to staging as it is
};

class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual const char* name() const = 0;

  // A batch of the machine's order (ncclGroupStart / ncclGroupEnd).
  virtual void BeginBatch() {}
  virtual Status EndBatch() { return Status::OK(); }
  virtual Status ReduceScatter(CollectiveWork* w) = 0;
  virtual Status Upload(CollectiveWork* w) = 0;
  virtual Status AllGather(CollectiveWork* w) = 0;
  // One machine: the whole reduction in one all-reduce queued now, on the
  // calling thread, ordered before what the caller queues next on `stream`.
  virtual Status AllReduce(CollectiveWork* w, void* stream) = 0;
  // Whether ReduceScatter applies an average's 1/divisor for `dtype`
  // (NCCL's pre-multiplied sum); otherwise the reducer divides on the host.
  virtual bool ScalesAverage(DataType dtype) const = 0;
  // Whether the work up to `phase` finished (an error: it failed).
  virtual Status Poll(CollectiveWork* w, CollectivePhase phase, bool* done) = 0;
  // Frees the library's state of `w` (once Poll said done, or after Abort).
  virtual void Retire(CollectiveWork* w) = 0;

  // Host memory for staging: pinned, pooled by size class, never freed while
  // the library lives (no allocation or device synchronisation on the hot path).
  virtual Status AcquireStaging(uint64_t bytes, char** out) = 0;
  virtual void ReleaseStaging(char* buffer) = 0;
  virtual uint64_t staging_bytes() = 0;

  virtual Status RecordReady(void* stream, void** event) = 0;
  virtual void ReturnReady(void* event) = 0;

  // Stream-ordered completion of a result that arrives through the host
  // (across machines): work queued on `stream` after this returns waits, on
  // the device, until ReleaseHold(*hold); the host never blocks for it.
  virtual Status HoldStream(void* stream, void** hold) {
    return Status::Invalid(std::string("the '") + name() + "' collectives cannot hold a stream");
  }
  virtual void ReleaseHold(void* hold) {}

  // Whether this library compresses slices of `push`'s codec where they live
  // (SliceCompression); otherwise the engine compresses the staged slice.
  virtual bool CompressesSlices(const CodecHeader& push) const { return false; }
  // Frees what the library keeps for a SliceCompression (its `state`).
  virtual void ForgetCompression(SliceCompression* c) {}

  // An asynchronous failure of the library (NCCL's async error), if any.
  virtual Status CheckAsync() { return Status::OK(); }
  // Stops every collective in flight on this rank (ncclCommAbort): no rank
  // is left spinning in a kernel whose peer is gone. Poll reports done or an
  // error afterwards, never waiting.
  virtual void Abort() = 0;
};

}  // namespace bps
