// What the engine thread works on: an accepted push_pull (TensorOp) and its
// partitions (PartitionTask), each moving through the stages below.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/completion.h"
#include "common/reduce_op.h"
#include "common/tensor_view.h"
#include "common/dtype.h"
#include "common/partitioner.h"
#include "common/status.h"
#include "compression/compressor.h"
#include "core/server_client.h"
#include "local/local_reducer.h"

namespace bps {

struct TensorOp;

// A tensor's shape as the engine prints it ("[10, 5]"; no shape: 1-D).
std::string ShapeString(const TensorView& t);

// A compressed partition slice's worker state, per network key, kept across
// steps: the error-feedback residual, the worker momentum, and the buffers
// of the push and its answer (rounds of one key never overlap, so one of
// each suffices).
struct CompressedSlice {
  CodecHeader codec;
  uint64_t wire_bytes = 0;
  uint64_t answer_bytes = 0;  // CompressedBytes(AnswerCodec(codec, machines))
  std::vector<float> residual;  // empty without error feedback
  std::vector<float> momentum;  // empty without worker momentum
  std::vector<uint32_t> cuts;   // onebit's segment boundaries (SliceCuts)
  SliceState State(const CompressionSpec& spec) {
    SliceState s;
    s.cuts = cuts.data();
    s.residual = residual.empty() ? nullptr : residual.data();
    s.momentum = momentum.empty() ? nullptr : momentum.data();
    s.mu = static_cast<float>(spec.momentum);
    s.nesterov = spec.nesterov;
    return s;
  }
  std::vector<char> send, answer;
  // Compressed by the reducer where the slice lives (device memory, issue 39):
  // its codec, key and the reducer's buffers. Null: the engine compresses the
  // staged slice on the host (send, answer, residual, momentum above).
  std::unique_ptr<SliceCompression> on_reducer;
  LocalReducer* reducer = nullptr;
  CompressedSlice() = default;
  CompressedSlice(const CompressedSlice&) = delete;
  CompressedSlice& operator=(const CompressedSlice&) = delete;
  ~CompressedSlice() {
    if (on_reducer && reducer) reducer->ForgetCompression(on_reducer.get());
  }
};

// A partition's stages, in pipeline order (the engine's table of steps,
// stage_pipeline.cc, says what each one does):
//   kWaitTurn  the previous round of its key closed; take the reducer's entry
//   kStage     this rank's contribution handed to the local reducer
//   kReduce    its own slice summed over the local ranks
//   kPush      (several machines) sent to its server: needs a credit
//   kAwait     the machines' sum arrives (I/O thread)
//   kGather    every slice into the output, scaled for an average
enum class Stage { kWaitTurn, kStage, kReduce, kPush, kAwait, kGather, kDone };
const char* StageName(Stage stage);

// One push of a partition: a network slice this rank owns (one with equal
// machines; several when machines differ in size, issue 29).
struct NetworkPush {
  Range slice;                 // elements of the partition
  uint64_t key = 0;
  int server = -1;
  std::shared_ptr<PendingPull> pull;
  CompressedSlice* compressed = nullptr;  // this round's push is compressed
  char* answer_dst = nullptr;  // where the decompressed answer goes
};

struct PartitionTask {
  TensorOp* op = nullptr;
  uint32_t index = 0;
  Range range;                 // elements of the tensor
  Stage stage = Stage::kWaitTurn;
  uint64_t local_key = 0;      // shared-memory entry key / per-rank round key
  uint32_t round = 0;
  LocalPartition* entry = nullptr;  // the local reducer's state; null with one local rank
  uint32_t gathered_mask = 0;  // slices already copied to the output
  std::vector<NetworkPush> pushes;  // this round's, in slice order; sent up to `pushes_sent`
  size_t pushes_sent = 0;
  std::shared_ptr<PartitionIo> io = std::make_shared<PartitionIo>();
  bool staged = false;         // counted in entry->arrived for this round
  bool closed_round = false;   // failed: the reducer was told (CloseFailedRound)
  uint64_t net_start_us = 0;   // timeline only
  std::chrono::steady_clock::time_point last_progress;
};

struct TensorOp {
  uint64_t seq = 0;
  std::string name;
  uint64_t name_hash = 0;
  uint32_t name_op = 0;  // this is the name's n-th op (of its generation) on every rank
  const char* input = nullptr;
  char* output = nullptr;
  DataType dtype = DataType::kFloat32;
  int64_t count = 0;
  std::string shape;  // "[10, 5]"
  std::string shape_and_op;  // "[10, 5] (average)": what local ranks compare, for their errors
  uint64_t signature = 0;
  int32_t priority = 0;
  bool average = false;
  CompressionSpec compression;  // declared for its name (bps_declare_compression)
  // Device tensors: the GPU, and the caller's stream at submission (an
  // event the first collective waits for). The reducer of this op: the
  // device reducer, the host one, or null (one local rank, host memory).
  int device = -1;
  void* ready_event = nullptr;
  LocalReducer* reducer = nullptr;
  // One machine, device tensor: reduced by one fused collective launched at
  // submission (LocalReducer::LaunchFused); its one partition starts at kGather.
  bool fused = false;
  LocalPartition* fused_handle = nullptr;
  // Submitted stream-ordered (bps_push_pull_async_stream_ordered): the
  // caller completed its future at once and moved on, so a failure can only
  // reach it through the engine's latch. Across machines the caller's result
  // stream waits on `result_hold` until the result is in the output.
  bool caller_moved_on = false;
  void* result_hold = nullptr;
  DoneCallback done = nullptr;
  void* user_data = nullptr;
  // Its own deadline (bps_push_pull_async_with_deadline): the engine's alarm
  // that fails it, taken back when it completes first. 0: none.
  double deadline_seconds = 0;
  uint64_t deadline_alarm = 0;
  int remaining = 0;
  bool failed = false;
  bool mismatch_from_server = false;  // a server reported it to every rank
  Status failure;              // why, reported by done() once every partition retired
  int unretired = 0;           // failed op: partitions whose I/O or round is still open
  std::vector<std::unique_ptr<PartitionTask>> parts;

  // A validated submission's op: its name, buffers, shape and the signature
  // the local ranks and the servers compare (tensor_op.cc).
  static std::unique_ptr<TensorOp> FromSubmission(const TensorView& input, void* output, const std::string& name,
                                                  int32_t priority, ReduceOp reduce_op);
  // Compares as `shape` across ranks (a fused bucket: its members' shapes)
  // and names it in the ranks' errors.
  void DescribeShapeAs(const std::string& shape);
};

}  // namespace bps
