// The worker-side push-pull engine: one per process.
//
// A push_pull is cut into partitions (PlanPartitions); each partition moves
// through stages, driven by one engine thread without blocking, so tensors
// submitted in different orders on different ranks never deadlock:
//
//   kStage    copy this rank's non-owned slices into its shared-memory slot
//   kReduce   (slice owner) sum its slice over all local ranks
//   kPush     (distributed) send the reduced slice to its server: needs a
//             scheduling credit; highest priority first
//   kAwait    the server's sum arrives straight into the slot (I/O thread)
//   kGather   copy every slice's result into the output, scaled for average
//
// One machine (no servers): kStage -> kReduce -> kGather. One local rank:
// no shared memory; push from the input, receive into the output.
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

#include "c_api/byteps_c.h"
#include "common/config.h"
#include "common/dtype.h"
#include "common/status.h"
#include "core/credit_window.h"
#include "core/partition_queue.h"
#include "common/partitioner.h"
#include "core/timeline.h"
#include "local/local_reducer.h"
#include "local/shared_memory.h"
#include "server/server.h"
#include "store/store.h"
#include "transport/transport.h"

namespace bps {

struct TensorOp;

enum class Stage { kWaitTurn, kStage, kReduce, kPush, kAwait, kGather, kDone };

// I/O that may still touch a partition's buffers: a push not yet written
// (the input is read until on_sent) and a registered pull (the response may
// be written into dst). A partition completes, and a failed op calls done(),
// only once this is zero, so no byte moves after done() (issue 13, bug 1).
struct PartitionIo {
  std::atomic<int> in_flight{0};
};

// A response destination registered before the push is sent. Shared with the
// I/O thread's callbacks, which may run after the partition gave up on it.
struct PendingPull {
  char* dst = nullptr;
  uint64_t bytes = 0;
  uint32_t round = 0;
  std::atomic<int> state{0};  // 0 waiting, 1 arrived, 2 failed
  std::string error;
  transport::Connection* conn = nullptr;  // where the receive is posted
  std::shared_ptr<PartitionIo> io;
  std::atomic<bool> released{false};
  // Counts this pull out of io->in_flight exactly once (its receive's callback).
  void Release() {
    if (!released.exchange(true)) io->in_flight.fetch_sub(1, std::memory_order_acq_rel);
  }
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
  uint64_t net_key = 0;
  int server = -1;
  std::shared_ptr<PendingPull> pull;
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
  bps_done_fn done = nullptr;
  void* user_data = nullptr;
  int remaining = 0;
  bool failed = false;
  bool mismatch_from_server = false;  // a server reported it to every rank
  Status failure;              // why, reported by done() once every partition retired
  int unretired = 0;           // failed op: partitions whose I/O or round is still open
  std::vector<std::unique_ptr<PartitionTask>> parts;
};

struct EngineStats {
  std::atomic<uint64_t> bytes_pushed{0}, bytes_pulled{0}, ops_completed{0}, partitions_completed{0};
  std::atomic<uint64_t> local_reduce_ns{0}, gather_ns{0}, stage_ns{0};
  std::atomic<int64_t> queue_depth{0};
  static constexpr int kMaxTrackedServers = 256;
  std::atomic<uint64_t> bytes_per_server[kMaxTrackedServers] = {};
};

// How an engine is wired into its job beyond Config (the process bootstrap in
// csrc/c_api decides these; tests leave them at their defaults).
struct EngineOptions {
  // Plain torchrun without dedicated servers: local rank 0 of each machine
  // runs that machine's server inside its engine.
  bool colocated_servers = false;
  // Where a colocated server listens (ChooseListenHost, by the bootstrap).
  std::string colocated_server_host = "127.0.0.1";
  // The machine-local reduce-scatter / all-gather among local ranks
  // (csrc/local/local_reducer.h), by name.
  std::string local_reducer = "shm";
  // The timeline (off unless the bootstrap read BYTEPS_TRACE_ON=1).
  TraceSettings trace;
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
  bool failed() const { return has_fatal_.load(); }
  // Why the engine failed (OK while it has not): the one failure latch of
  // this rank, which the GPU path shares.
  Status failure();
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
  Status Submit(const bps_tensor& input, void* output, const std::string& name, int32_t priority, int32_t reduce_op,
                bps_done_fn done, void* user_data, void* stream = nullptr);
  // One machine, device tensors: the result is ordered on the submitting
  // stream when Submit returns (the fused path), as ProcessGroupNCCL does.
  bool DeviceStreamOrdered() const;
  std::string StatsJson();

 private:
  // The device reducer for `device`, made once (every local rank makes it on
  // its first device tensor).
  Status EnsureDeviceReducer(int device);
  Status StartSteps();
  // Stops and releases whatever Start started (threads, connections, shared
  // memory); used by a failed Start and by Shutdown.
  void ReleaseResources();
  Status SetUpLocalReducer();
  // The address server `server` registered, waiting up to BYTEPS_RENDEZVOUS_TIMEOUT.
  Status WaitForServer(int server, std::string* addr);
  Status ConnectServers();
  void Loop();
  void Activate(std::unique_ptr<TensorOp> op);
  // What this rank brings to the local reducer for partition `t` (null: the whole tensor).
  LocalContribution ContributionOf(const TensorOp& op, const PartitionTask* t) const;
  bool Advance(PartitionTask& t);  // true when it moved
  void SendPush(PartitionTask& t, const char* data, uint64_t bytes, char* dst);
  void FinishPartition(PartitionTask& t);
  void FailOp(TensorOp* op, const Status& st);
  // A mismatch failed `op`: new keys for its name, and the other machines told.
  void OnTensorMismatch(TensorOp* op);
  void FailTensorsReportedByServers();
  // Server connections (I/O thread): frames without a posted receive, and loss.
  void OnUnexpected(transport::Connection* conn, const MessageHeader& header, const std::string& payload);
  void OnServerClosed(transport::Connection* conn, const Status& reason);
  // A partition of a failed op closes its round once its I/O stopped and its
  // turn came: the next op of that name then runs (issue 13, bug 2).
  bool RetireFailed(PartitionTask& t);
  void CompleteFailedOp(TensorOp* op);
  void SetFatal(const Status& st);
  void Ring();
  void CheckTimeoutsAndPeers();
  std::string DescribeWait(const PartitionTask& t);

  Config config_;
  const EngineOptions options_;
  std::atomic<bool> initialized_{false};
  bool started_ = false;
  int num_servers_ = 0;
  std::shared_ptr<Store> store_;
  std::unique_ptr<Server> colocated_server_;
  std::unique_ptr<LocalReducer> reducer_;  // host tensors; null with one local rank
  // Device tensors' reducer (NCCL), made by the first device submission.
  std::mutex device_mu_;
  std::unique_ptr<LocalReducer> device_reducer_;
  int device_ = -1;
  std::atomic<LocalReducer*> device_reducer_live_{nullptr};  // what the engine thread drives
  std::unique_ptr<transport::Transport> transport_;
  std::vector<std::vector<std::shared_ptr<transport::Connection>>> server_conns_;
  std::vector<std::string> server_addresses_;

  std::thread thread_;
  std::atomic<bool> running_{false};
  std::atomic<uint32_t> local_doorbell_{0};  // used without shared memory
  std::mutex submit_mu_;
  bool accepting_ = false;  // under submit_mu_: Submit enqueues only while set
  std::deque<std::unique_ptr<TensorOp>> submitted_;
  uint64_t next_seq_ = 0;

  // Engine-thread state.
  std::vector<std::unique_ptr<TensorOp>> ops_;
  PartitionQueue<PartitionTask> active_;  // scheduling order
  std::unordered_map<uint64_t, uint32_t> next_round_;
  std::unordered_map<uint64_t, uint32_t> done_round_;
  std::unordered_map<uint64_t, uint32_t> mismatch_generation_;  // by plain name hash
  std::unordered_map<uint64_t, uint32_t> ops_of_name_;  // by (generation's) name hash: TensorOp::name_op
  CreditWindow credits_;  // bytes of pushes queued to the network
  std::chrono::steady_clock::time_point last_peer_check_;

  std::mutex net_mu_;
  std::unordered_map<uint64_t, std::shared_ptr<PendingPull>> pending_;  // by net key: routes error frames
  // A tensor's failure told by a server: every op of that name (this
  // generation) from `first_op` on fails with `why`.
  struct TensorError {
    uint64_t name_hash = 0;
    uint32_t first_op = 0;
    std::string why;
  };
  std::vector<TensorError> tensor_errors_;

  std::mutex fatal_mu_;
  Status fatal_;
  std::atomic<bool> has_fatal_{false};
  std::atomic<bool> shutting_down_{false};

  EngineStats stats_;
  Timeline timeline_;
  std::chrono::steady_clock::time_point last_stats_log_;
};

}  // namespace bps
