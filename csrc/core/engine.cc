// The engine's wiring: start (rendezvous, local reducer, servers, thread),
// submission, the engine thread's loop, shutdown. What a partition does in
// each stage is in stage_pipeline.cc, how an op becomes partitions in
// op_activation.cc, what a failed op does in op_failure.cc.
#include "core/engine.h"

#include <algorithm>

#include "common/futex.h"
#include "common/hashing.h"
#include "common/logging.h"
#include "common/steady_ns.h"
#include "core/rendezvous.h"
#include "core/validation.h"

namespace bps {
namespace {

using Clock = std::chrono::steady_clock;

// Adds `ns` to a total and keeps the largest single one (only the engine
// thread writes them).
void CountMax(std::atomic<uint64_t>& total, std::atomic<uint64_t>& largest, uint64_t ns) {
  total.fetch_add(ns, std::memory_order_relaxed);
  if (ns > largest.load(std::memory_order_relaxed)) largest.store(ns, std::memory_order_relaxed);
}

}  // namespace

Engine::Engine(Config config, std::shared_ptr<Store> store, std::unique_ptr<transport::Transport> transport,
               EngineOptions options)
    : config_(std::move(config)), options_(std::move(options)), store_(std::move(store)),
      transport_(std::move(transport)) {}

Engine::~Engine() { Shutdown(); }

Status Engine::Start() {
  if (started_) return Status::Invalid("an engine starts once: make a new one to start again");
  started_ = true;
  // Transactional: a failure at any step stops what the earlier steps
  // started (issue 13, bug 4).
  Status st = StartSteps();
  if (!st.ok()) ReleaseResources();
  return st;
}

Status Engine::StartSteps() {
  const Config& c = config_;
  if (c.role != Role::kWorker) {
    return Status::Invalid(std::string("init() called in a process with DMLC_ROLE=") + RoleName(c.role) +
                           ": servers and schedulers run bps_run_server / bps_run_scheduler");
  }
  if (c.local_size < 1 || c.local_size > kMaxLocalRanks) {
    return Status::Invalid("local size " + std::to_string(c.local_size) + " must be in [1, " +
                           std::to_string(kMaxLocalRanks) + "]");
  }
  if (c.local_rank < 0 || c.local_rank >= c.local_size) {
    return Status::Invalid("local rank " + std::to_string(c.local_rank) + " must be < local size " +
                           std::to_string(c.local_size));
  }
  if (c.worker_id < 0 || c.worker_id >= c.num_worker) {
    return Status::Invalid("machine index " + std::to_string(c.worker_id) + " must be < " + std::to_string(c.num_worker));
  }
  if (!store_) return Status::Invalid("an engine needs a rendezvous store");
  if (!transport_ && c.distributed()) return Status::Invalid("a job across machines needs a transport to its servers");
  SetLogIdentity("worker " + std::to_string(c.rank()));

  if (c.distributed()) {
    if (c.num_server > 0) {
      num_servers_ = c.num_server;
    } else if (options_.colocated_servers) {
      num_servers_ = c.num_worker;  // plain torchrun: one server per machine
    } else {
      return Status::Invalid("DMLC_NUM_WORKER=" + std::to_string(c.num_worker) +
                             " machines need parameter servers, but DMLC_NUM_SERVER=0");
    }
  }
  BPS_RETURN_IF_ERROR(RendezvousWorkers(store_.get(), &config_));
  SetLogIdentity("worker " + std::to_string(config_.rank()));  // machines of different sizes: known now
  if (transport_) transport_->SetIdentityRank(config_.rank());  // the servers count ranks by it
  if (config_.local_size > 1) {
    HostReducer host;
    BPS_RETURN_IF_ERROR(options_.host_reducer(config_, store_.get(), &host));
    reducer_ = std::move(host.reducer);
    peers_ = std::move(host.peers);
  }
  ServerClient::Callbacks callbacks;
  // A server's receipts and answers concern this rank's partitions only.
  callbacks.ring = [this] { RingSelf(); };
  callbacks.fail = [this](const Status& why) { SetFatal(why); };
  servers_.reset(new ServerClient(config_, store_, std::move(transport_), callbacks));
  BPS_RETURN_IF_ERROR(servers_->Connect(num_servers_));
  // BYTEPS_SCHEDULING_CREDIT counts partitions of BYTEPS_PARTITION_BYTES
  // (a device tensor's partitions are charged at the host size, Push).
  credits_.Configure(config_.scheduling_credit > 0
                         ? static_cast<uint64_t>(config_.scheduling_credit) * static_cast<uint64_t>(config_.partition_bytes)
                         : 0,
                     config_.scheduling_credit_per_server ? num_servers_ : 1);
  watchdog_.Configure(config_.timeout_seconds, Clock::now());
  last_stats_log_ = Clock::now();
  timeline_.Configure("worker " + std::to_string(rank()), "rank" + std::to_string(rank()), options_.trace);
  running_ = true;
  {
    std::lock_guard<std::mutex> lock(submit_mu_);
    accepting_ = true;
  }
  thread_ = std::thread([this] { Loop(); });
  initialized_ = true;
  BPS_LOG(Info) << "initialised rank " << rank() << " of " << size() << " (local " << config_.local_rank << "/"
                << config_.local_size << ", machine " << config_.worker_id << "/" << config_.num_worker << ", "
                << num_servers_
                << (options_.colocated_servers && c.distributed() && c.num_server == 0 && c.local_rank == 0
                        ? " colocated"
                        : "")
                << " servers)";
  if (rank() == 0) BPS_LOG(Info) << "configuration: " << ConfigSummary(config_);
  return Status::OK();
}

Status Engine::Submit(const TensorView& input, void* output, const std::string& name, int32_t priority,
                      ReduceOp reduce_op, DoneCallback done, void* user_data, const SubmitOptions& options,
                      uint64_t* op_id) {
  void* stream = options.stream;
  void* result_stream = options.result_stream;
  if (!(options.timeout_seconds >= 0)) {  // NaN too
    return Status::Invalid("push_pull of '" + name + "': a deadline must be >= 0 seconds (0: none), got " +
                           std::to_string(options.timeout_seconds));
  }
  if (!initialized_) return Status(StatusCode::kNotInitialized, "byteps is not initialised: call init() first");
  BPS_RETURN_IF_ERROR(failure_.status());
  BPS_RETURN_IF_ERROR(ValidatePushPull(input, output, name, reduce_op, done));
  std::unique_ptr<TensorOp> op = TensorOp::FromSubmission(input, output, name, priority, reduce_op);
  if (!options.shape_text.empty()) op->DescribeShapeAs(options.shape_text);
  {
    std::lock_guard<std::mutex> lock(compression_mu_);
    auto declared = compression_by_name_.find(op->name_hash);
    if (declared != compression_by_name_.end()) op->compression = declared->second;
  }
  const auto& ends = op->compression.segment_ends;
  if (ends && ends->back() != static_cast<uint64_t>(op->count)) {
    return Status::Invalid("tensor '" + name + "' has " + std::to_string(op->count) +
                           " elements but its compression declares segments ending at " + std::to_string(ends->back()) +
                           " (bps_declare_compression_segments: the sizes of its parts must add up to the tensor)");
  }
  op->done = done;
  op->user_data = user_data;
  op->device = input.device >= 0 ? input.device : -1;
  op->reducer = reducer_.get();
  if (op->device >= 0) {
    BPS_RETURN_IF_ERROR(EnsureDeviceReducer(op->device).WithContext("tensor '" + name + "'"));
    op->reducer = device_reducer_.get();
    if (result_stream && !DevicePushPullStreamOrdered()) {
      return Status::Invalid("push_pull of '" + name + "': a stream-ordered result was asked for, but this engine "
                             "completes device results across machines on the host (BYTEPS_GPU_STREAM_ORDERED=0)");
    }
    BPS_RETURN_IF_ERROR(op->reducer->RecordReady(stream, &op->ready_event));
    op->caller_moved_on = result_stream != nullptr;
    if (!config_.distributed()) {
      // One machine: one fused collective, launched now in this rank's
      // submission order and stream-ordered for the caller.
      Status st = op->reducer->LaunchFused(ContributionOf(*op, nullptr), result_stream ? result_stream : stream,
                                           &op->fused_handle);
      if (!st.ok()) {
        op->reducer->ReturnReady(op->ready_event);
        return st.WithContext("push_pull of '" + name + "'");
      }
      op->fused = true;
    } else if (result_stream) {
      // Across machines the result arrives through the host: the caller's
      // result stream waits on the device for the engine to say it is in.
      Status st = op->reducer->HoldStream(result_stream, &op->result_hold);
      if (!st.ok()) {
        op->reducer->ReturnReady(op->ready_event);
        return st.WithContext("push_pull of '" + name + "'");
      }
    }
  }
  {
    // Checked under the lock the engine thread drains with: once Shutdown
    // stopped accepting, nothing is enqueued that the thread would miss.
    std::lock_guard<std::mutex> lock(submit_mu_);
    if (!accepting_) {
      // Shut down meanwhile: a queued op's event goes back. A fused
      // collective already launched keeps its event (freed with the
      // reducer's events) and leaks its few bytes of bookkeeping.
      if (op->ready_event && !op->fused) op->reducer->ReturnReady(op->ready_event);
      ReleaseResultHold(op.get());
      return Status(StatusCode::kNotInitialized, "byteps is not initialised: call init() first");
    }
    op->seq = next_seq_++;
    if (options.timeout_seconds > 0) {
      op->deadline_seconds = options.timeout_seconds;
      const uint64_t seq = op->seq;
      op->deadline_alarm = alarms_.After(options.timeout_seconds, [this, seq] {
        PostFailRequest(FailRequest{seq, StatusCode::kDeadlineExceeded, ""});
      });
    }
    if (op_id) *op_id = op->seq + 1;
    if (!options.recorded_by_caller) RecordSubmission(SubmissionOf(input, name, priority, reduce_op));
    submitted_.push_back(std::move(op));
    stats_.queue_depth++;
    // Under the lock: a Shutdown that stopped accepting after this op cannot
    // have released the reducer this rings. Only this engine has work now
    // (its stage-in wakes the other local ranks).
    RingSelf();
  }
  return Status::OK();
}

Submission Engine::SubmissionOf(const TensorView& input, const std::string& name, int32_t priority,
                                ReduceOp reduce_op) {
  Submission record;
  record.name = name;
  record.dtype = static_cast<DataType>(input.dtype);
  if (input.shape) {
    record.shape.assign(input.shape, input.shape + input.ndim);
  } else if (input.num_elements != 1) {
    record.shape = {input.num_elements};  // TensorView: no shape is 1-D
  }
  record.priority = priority;
  record.reduce_op = reduce_op;
  record.device = input.device >= 0 ? input.device : -1;
  return record;
}

void Engine::RecordSubmission(Submission record) {
  if (options_.submissions) options_.submissions->Record(std::move(record));
}

Status Engine::Cancel(uint64_t op_id, const std::string& why) {
  std::lock_guard<std::mutex> lock(submit_mu_);
  if (!accepting_) return Status(StatusCode::kNotInitialized, "byteps is not running: nothing to cancel");
  if (op_id == 0 || op_id > next_seq_) {
    return Status::Invalid("cancel: no operation with id " + std::to_string(op_id) + " was accepted");
  }
  fail_requests_.push_back(FailRequest{op_id - 1, StatusCode::kCancelled, why.empty() ? "cancelled by the caller" : why});
  Ring();
  return Status::OK();
}

void Engine::PostFailRequest(FailRequest request) {
  std::lock_guard<std::mutex> lock(submit_mu_);
  if (!accepting_) return;  // shutting down: every op fails anyway
  fail_requests_.push_back(std::move(request));
  Ring();
}

void Engine::Ring() {
  if (peers_) {
    peers_->Ring();
  } else {
    local_doorbell_.fetch_add(1);
    FutexWakeAll(&local_doorbell_);
  }
}

void Engine::RingSelf() {
  if (peers_) {
    peers_->RingSelf();
  } else {
    Ring();
  }
}

void Engine::Loop() {
  while (true) {
    uint32_t seen = peers_ ? peers_->Doorbell() : local_doorbell_.load();
    std::deque<std::unique_ptr<TensorOp>> fresh;
    std::deque<FailRequest> requests;
    {
      // Together: a cancel is posted after its op was submitted, so the op
      // is active by the time its request is carried out.
      std::lock_guard<std::mutex> lock(submit_mu_);
      fresh.swap(submitted_);
      requests.swap(fail_requests_);
    }
    for (auto& op : fresh) Activate(std::move(op));
    for (auto& request : requests) FailRequested(request);
    FailTensorsReportedByServers();
    // Failed partitions stay active until their I/O stopped and their round
    // closed, so this also waits for every buffer to be released.
    if (!running_ && active_.empty()) break;

    bool moved = !fresh.empty() || !requests.empty();
    const bool stopping = failure_.failed() || !running_;
    if (stopping) {
      const Status st = failure_.failed() ? failure_.status()
                                          : Status::Shutdown("byteps shut down while the operation was pending");
      for (auto& op : ops_) FailOp(op.get(), st);
    }
    const uint64_t pass_start = SteadyNowNs();
    credits_.BeginPass();
    for (auto& entry : active_) {
      PartitionTask* t = entry.second;
      if (t->stage == Stage::kDone) continue;
      if (t->op->failed) {
        moved |= RetireFailed(*t);
      } else if (!stopping && Advance(*t)) {
        t->last_progress = Clock::now();
        moved = true;
      }
    }
    // The machine's order of collectives: issue what it allows now.
    if (reducer_) moved |= reducer_->Progress();
    if (LocalReducer* device = device_reducer_live_.load()) {
      const uint64_t issue_start = SteadyNowNs();
      moved |= device->Progress();
      CountMax(stats_.device_issue_ns, stats_.device_issue_max_ns, SteadyNowNs() - issue_start);
    }
    if (moved) {
      stats_.passes.fetch_add(1, std::memory_order_relaxed);
      CountMax(stats_.pass_ns, stats_.pass_max_ns, SteadyNowNs() - pass_start);
    }
    for (auto& op : ops_) {
      if (op->failed && op->unretired == 0 && op->done) CompleteFailedOp(op.get());
    }
    // Retire finished partitions and operations.
    active_.EraseIf([](PartitionTask* t) { return t->stage == Stage::kDone; });
    // Every task of a completed op is kDone and was just dropped, so such an
    // op is no longer referenced.
    ops_.erase(std::remove_if(ops_.begin(), ops_.end(),
                              [](const std::unique_ptr<TensorOp>& op) {
                                return op->failed ? op->done == nullptr : op->remaining == 0;
                              }),
               ops_.end());
    CheckTimeoutsAndPeers();
    if (CurrentLogLevel() <= LogLevel::kInfo && Clock::now() - last_stats_log_ > std::chrono::seconds(10)) {
      last_stats_log_ = Clock::now();
      BPS_LOG(Info) << "stats " << StatsJson();
    }
    if (!moved) {
      if (peers_) {
        peers_->WaitDoorbell(seen, 50);
      } else if (local_doorbell_.load() == seen) {
        FutexWait(&local_doorbell_, seen, 50);
      }
    }
  }
  // Shutdown stopped accepting before it stopped the loop; anything accepted
  // before that still completes (issue 13, bug 3).
  std::deque<std::unique_ptr<TensorOp>> late;
  {
    std::lock_guard<std::mutex> lock(submit_mu_);
    late.swap(submitted_);
  }
  for (auto& op : late) {
    stats_.queue_depth--;
    if (op->deadline_alarm) alarms_.Cancel(op->deadline_alarm);
    ReleaseResultHold(op.get());
    const std::string msg = "push_pull of '" + op->name + "' failed: byteps shut down while the operation was pending";
    op->done(op->user_data, static_cast<int>(StatusCode::kShutdown), msg.c_str());
  }
}

Status Engine::Shutdown() {
  if (!initialized_) return Status::OK();
  {
    std::lock_guard<std::mutex> lock(submit_mu_);
    accepting_ = false;
  }
  running_ = false;
  Ring();
  if (thread_.joinable()) thread_.join();
  timeline_.Finish();
  // A failed process does not leave "in order": it tells the servers why, and
  // they relay the root cause to every other worker.
  if (servers_) {
    servers_->Quiesce();
    servers_->SayGoodbye(failure_.status());
  }
  // A colocated server is stopped after this, by whoever built it beside
  // the engine (c_api/process_engine).
  ReleaseResources();
  return Status::OK();
}

void Engine::ReleaseResources() {
  if (servers_) servers_->Quiesce();  // connection closes below are not failures
  {
    std::lock_guard<std::mutex> lock(submit_mu_);
    accepting_ = false;
  }
  running_ = false;
  if (thread_.joinable()) {  // only when a step after the thread's start failed
    Ring();
    thread_.join();
  }
  if (servers_) servers_->Close();  // stops the transport's I/O thread
  servers_.reset();
  transport_.reset();
  // Before the reducers: a slice compressed by the device reducer frees its
  // device buffers through it.
  compressed_slices_.clear();
  {
    // Not under a SetFatal from another thread (op_failure.cc).
    std::lock_guard<std::mutex> lock(reducers_mu_);
    // The device reducer first: its order channel lives in the machine
    // group's shared memory.
    device_reducer_live_ = nullptr;
    device_liveness_live_ = nullptr;
    device_reducer_.reset();
    device_liveness_.reset();
    if (peers_) peers_->Leave();
    reducer_.reset();
    peers_.reset();
  }
  store_.reset();
  initialized_ = false;
}

}  // namespace bps
