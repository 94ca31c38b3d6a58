// The worker-side push-pull engine: one per process, host and device tensors
// alike. It is wiring: a push_pull is cut into partitions (the local
// reducer's plan) that move through the stage table (stage_pipeline.cc),
// driven by one engine thread without blocking, so tensors submitted in
// different orders on different ranks never deadlock. Its parts:
//   LocalReducer     the machine-local step: shared memory for host
//                    tensors, NCCL for device tensors (local_reducer.h)
//   ServerClient     pushes to the parameter servers and their answers
//   PartitionQueue   scheduling order (priority), CreditWindow: bytes in flight
//   FailureLatch     the rank's one failure; the watchdog (watchdog.cc)
//   EngineStats      counters (stats.h)
// One machine (no servers): kStage -> kReduce -> kGather. One local rank,
// host tensors: no reducer; push from the input, receive into the output.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/alarm_clock.h"
#include "common/completion.h"
#include "common/reduce_op.h"
#include "common/tensor_view.h"
#include "common/config.h"
#include "common/dtype.h"
#include "common/status.h"
#include "core/credit_window.h"
#include "core/failure_latch.h"
#include "core/name_rounds.h"
#include "core/partition_queue.h"
#include "common/partitioner.h"
#include "core/server_client.h"
#include "core/stats.h"
#include "core/submission_log.h"
#include "core/tensor_op.h"
#include "core/watchdog.h"
#include "common/timeline.h"
#include "local/local_reducer.h"
#include "local/shared_memory.h"
#include "store/store.h"
#include "transport/transport.h"

namespace bps {

// How an engine is wired into its job beyond Config (the process bootstrap in
// csrc/c_api decides these; tests leave them at their defaults).
struct EngineOptions {
  // Plain torchrun without dedicated servers: local rank 0 of each machine
  // runs that machine's server beside its engine (c_api/process_engine
  // builds it; core does not include server), and the engine counts one
  // server per machine.
  bool colocated_servers = false;
  // The machine-local reducers (csrc/local/local_reducer.h) the engine takes.
  // Factories, not objects: a reducer joins the machine's other local ranks,
  // which are known only after the job's rendezvous (machines may differ),
  // and a device reducer needs the rank's GPU, known at its first device
  // tensor. Host tensors: shared memory. Device tensors: what the CUDA build
  // registered (NCCL), or a test's; null refuses device tensors.
  HostReducerFactory host_reducer = &CreateShmLocalReducer;
  DeviceReducerFactory device_reducer = GetDeviceReducerFactory();
  // The timeline (off unless the bootstrap read BYTEPS_TRACE_ON=1).
  TraceSettings trace;
  // Where every accepted submission is recorded for join() (the process's
  // log, which outlives an engine restart); null: not recorded.
  std::shared_ptr<SubmissionLog> submissions;
};

// What a caller may add to a submission beyond the tensor.
struct SubmitOptions {
  // Device tensors: the caller's stream, and a result stream (see Submit).
  void* stream = nullptr;
  void* result_stream = nullptr;
  // > 0: the op's own deadline, from acceptance (bps_push_pull_async_with_deadline).
  double timeout_seconds = 0;
  // Non-empty: what the ranks compare instead of the tensor's own shape (a
  // fused bucket's member shapes, core/fusion_plan.h), so a member of another
  // shape fails the bucket even when its length agrees.
  std::string shape_text;
  // The caller records the submission for join() itself: a group's engine
  // operations, which its one entry covers (RecordSubmission).
  bool recorded_by_caller = false;
};

// One worker rank. Built from a parsed Config, the job's rendezvous Store and
// the transport that reaches the servers; it reads no environment, so a test
// runs several ranks (and their servers) in one process. The process-wide
// engine of the adapters lives in csrc/c_api/process_engine.
class Engine {
 public:
  Engine(Config config, std::shared_ptr<Store> store, std::unique_ptr<transport::Transport> transport,
         EngineOptions options = EngineOptions());
  ~Engine();  // Shutdown()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Rendezvous with the job's other ranks, machine-local shared memory,
  // server connections, then the engine thread. Transactional: a failure
  // stops whatever earlier steps started (issue 13, bug 4). Once per engine.
  Status Start();
  // Completes every accepted operation, tells the servers goodbye (or, after
  // a failure, why), and stops every thread. Idempotent.
  Status Shutdown();
  // Fails the job from outside (the scheduler's abort, a dead peer): every
  // pending and later operation fails with `why`.
  void Fail(const Status& why);
  bool failed() const { return failure_.failed(); }
  // Why the engine failed (OK while it has not): the rank's one failure latch.
  Status failure() const { return failure_.status(); }
  bool initialized() const { return initialized_.load(); }
  const Config& config() const { return config_; }
  // The rendezvous store of this engine; csrc/gpu exchanges its NCCL unique
  // ids through it.
  std::shared_ptr<Store> store() const { return store_; }
  int rank() const { return config_.rank(); }
  int size() const { return config_.size(); }

  // Host or device tensors alike. A device tensor's work is ordered after
  // what the caller queued on `stream` (a cudaStream_t; null: the legacy
  // default stream); its reducer is made on the first one (a collective among
  // the machine's local ranks).
  // `result_stream` (device tensors; see DevicePushPullStreamOrdered): the
  // caller completes at once, and work it queues on result_stream after
  // Submit returns sees the result; `done` then only confirms, and a failure
  // latches the engine (the caller has moved on: its next call raises it).
  Status Submit(const TensorView& input, void* output, const std::string& name, int32_t priority, ReduceOp reduce_op,
                DoneCallback done, void* user_data, void* stream = nullptr, void* result_stream = nullptr) {
    SubmitOptions options;
    options.stream = stream;
    options.result_stream = result_stream;
    return Submit(input, output, name, priority, reduce_op, done, user_data, options, nullptr);
  }
  // As above, with a deadline; `op_id` (when not null) receives the op's
  // handle for Cancel. A passed deadline or a cancel fails the op on every
  // rank still waiting in its round, naming the cause, and moves its name to
  // fresh keys everywhere (as a mismatch does): the name stays usable.
  Status Submit(const TensorView& input, void* output, const std::string& name, int32_t priority, ReduceOp reduce_op,
                DoneCallback done, void* user_data, const SubmitOptions& options, uint64_t* op_id);
  // Fails accepted op `op_id` with kCancelled and `why`, unless it completes
  // first. Asynchronous: its done() reports the outcome.
  Status Cancel(uint64_t op_id, const std::string& why);
  // One machine, device tensors: the result is ordered on the submitting
  // stream when Submit returns (the fused path), as ProcessGroupNCCL does.
  bool DeviceStreamOrdered() const;
  // Whether Submit takes a `result_stream` for device tensors: one machine
  // (the fused path) and, across machines, a device-side wait on a word the
  // engine thread writes when the result is in (BYTEPS_GPU_STREAM_ORDERED=0
  // turns that off: the caller then waits on the host for `done`).
  bool DevicePushPullStreamOrdered() const;
  // Pushes of tensor `name` are compressed from its next submission on
  // ("onebit", "topk:ratio=0.01", ...; "" or "none": not; see
  // csrc/compression/compressor.h). Every rank must declare the same.
  // `segment_sizes`: a fused tensor's parts (a DDP bucket's parameters), in
  // order, adding up to the tensor: onebit keeps a scale per part.
  Status DeclareCompression(const std::string& name, const std::string& spec,
                            std::vector<uint64_t> segment_sizes = {});
  // Whether tensor `name` has a compression declared, and which (a group
  // submission fuses tensors of the same compression only, with a segment
  // per member: core/fused_group.h).
  bool DeclaredCompression(const std::string& name, CompressionSpec* spec);
  // DeclareCompression of a parsed spec (segments included); a spec that is
  // not enabled clears the name's declaration.
  void DeclareCompressionSpec(const std::string& name, CompressionSpec spec);
  // The log of accepted submissions that join() reads (EngineOptions::
  // submissions): what Submit records of one tensor, and a record made by a
  // caller that submits for others (a group: one entry for all its members).
  static Submission SubmissionOf(const TensorView& input, const std::string& name, int32_t priority,
                                 ReduceOp reduce_op);
  void RecordSubmission(Submission record);
  std::string StatsJson();

 private:
  // The stage table's entry: one stage's step of a partition.
  enum class Step { kWait, kMoved };
  using StepFn = Step (Engine::*)(PartitionTask& t);
  struct StageStep {
    Stage stage;
    StepFn run;
  };
  static const StageStep kPipeline[];

  // Lifecycle (engine.cc).
  Status StartSteps();
  // Stops and releases whatever Start started (threads, connections, shared
  // memory); used by a failed Start and by Shutdown.
  void ReleaseResources();
  // The device reducer for `device`, made once (every local rank makes it on
  // its first device tensor).
  Status EnsureDeviceReducer(int device);
  void Loop();
  void Activate(std::unique_ptr<TensorOp> op);
  void Ring();      // every local rank's engine (what may unblock another)
  void RingSelf();  // this rank's engine only (its own network events, submissions)
  // What this rank brings to the local reducer for partition `t` (null: the whole tensor).
  LocalContribution ContributionOf(const TensorOp& op, const PartitionTask* t) const;

  // The stage table (stage_pipeline.cc).
  bool Advance(PartitionTask& t);  // true when it moved
  Step WaitTurn(PartitionTask& t);
  Step StageIn(PartitionTask& t);
  Step ReduceLocally(PartitionTask& t);
  void PlanPushes(PartitionTask& t);
  Step Push(PartitionTask& t);
  Step AwaitAnswer(PartitionTask& t);
  Step Gather(PartitionTask& t);
  void FinishPartition(PartitionTask& t);
  // The compressed state of a push of `count` elements under `key`, or null
  // when it travels uncompressed (none declared, not float32, below
  // BYTEPS_MIN_COMPRESS_BYTES, async rounds, or no smaller compressed).
  // `offset`: the slice's first element in the tensor (onebit's segments).
  CompressedSlice* CompressionFor(const TensorOp& op, uint64_t key, uint64_t offset, uint64_t count);
  // The partition's push compressed by its reducer where the slice lives
  // (device tensors, equal machines, a codec the reducer has), else null.
  SliceCompression* SliceCompressionFor(const TensorOp& op, PartitionTask& t);

  // Failures of ops (op_failure.cc).
  void FailOp(TensorOp* op, const Status& st);
  // Failures of a round itself (a mismatch, a passed deadline, a cancel):
  // every rank of the round fails it and moves the name to fresh keys.
  static bool AbandonsRound(StatusCode code);
  // Such a failure failed `op`: new keys for its name, and the other machines told.
  void OnRoundAbandoned(TensorOp* op);
  // A deadline or cancel for op `seq`, posted from any thread (Cancel, the
  // alarm) and carried out on the engine thread.
  struct FailRequest {
    uint64_t seq = 0;
    StatusCode code = StatusCode::kCancelled;
    std::string why;  // a cancel's reason
  };
  void PostFailRequest(FailRequest request);
  void FailRequested(const FailRequest& request);
  void FailTensorsReportedByServers();
  // A partition of a failed op closes its round once its I/O stopped and its
  // turn came: the next op of that name then runs (issue 13, bug 2).
  bool RetireFailed(PartitionTask& t);
  void CompleteFailedOp(TensorOp* op);
  // Lets the caller's result stream go on past the op (its result is in, or
  // it failed); once per op.
  void ReleaseResultHold(TensorOp* op);
  void SetFatal(const Status& st);

  // The watchdog's checks (watchdog.cc; its rules: core/watchdog.h).
  void CheckTimeoutsAndPeers();
  std::string DescribeWait(const PartitionTask& t);

  Config config_;
  const EngineOptions options_;
  std::atomic<bool> initialized_{false};
  bool started_ = false;
  int num_servers_ = 0;
  std::shared_ptr<Store> store_;
  std::unique_ptr<LocalReducer> reducer_;  // host tensors; null with one local rank
  // The machine's other local ranks (doorbell, liveness, order channel); null with one local rank.
  std::unique_ptr<MachinePeers> peers_;
  // Device tensors' reducer (NCCL), made by the first device submission, and how its collectives fail.
  std::mutex device_mu_;
  std::shared_ptr<LocalReducer> device_reducer_;
  std::shared_ptr<PeerLiveness> device_liveness_;
  int device_ = -1;
  std::atomic<LocalReducer*> device_reducer_live_{nullptr};  // what the engine thread drives
  std::atomic<PeerLiveness*> device_liveness_live_{nullptr};
  // Held by SetFatal while it reaches the reducers from any thread, and by
  // ReleaseResources while it frees them.
  std::mutex reducers_mu_;
  std::unique_ptr<transport::Transport> transport_;  // until ServerClient takes it at Start
  std::unique_ptr<ServerClient> servers_;

  std::thread thread_;
  std::atomic<bool> running_{false};
  std::atomic<uint32_t> local_doorbell_{0};  // used without shared memory
  std::mutex submit_mu_;
  bool accepting_ = false;  // under submit_mu_: Submit enqueues only while set
  std::deque<std::unique_ptr<TensorOp>> submitted_;
  std::deque<FailRequest> fail_requests_;  // under submit_mu_, taken with submitted_
  std::mutex compression_mu_;
  std::unordered_map<uint64_t, CompressionSpec> compression_by_name_;  // by name hash, under compression_mu_
  uint64_t next_seq_ = 0;

  // Engine-thread state.
  std::vector<std::unique_ptr<TensorOp>> ops_;
  PartitionQueue<PartitionTask> active_;  // scheduling order
  NameRounds rounds_;  // keys, generations and rounds per name
  std::unordered_map<uint64_t, std::unique_ptr<CompressedSlice>> compressed_slices_;  // by network key  // by (generation's) name hash: TensorOp::name_op
  CreditWindow credits_;  // bytes of pushes queued to the network
  Watchdog watchdog_;

  FailureLatch failure_;

  EngineStats stats_;
  Timeline timeline_;
  std::chrono::steady_clock::time_point last_stats_log_;

  // Per-op deadlines. Last: destroyed (its thread joined) first, so no alarm
  // runs into a half-destroyed engine.
  AlarmClock alarms_;
};

}  // namespace bps
