#include "core/engine.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "common/futex.h"
#include "common/hashing.h"
#include "common/logging.h"
#include "common/net_util.h"
#include "common/reduce_kernels.h"
#include "core/rendezvous.h"
#include "core/validation.h"
#include "transport/handshake.h"

namespace bps {
namespace {

using Clock = std::chrono::steady_clock;

// The key of a tensor error that a worker relays through the servers: this
// tag in the high half, the failed op's TensorOp::name_op in the low half.
constexpr uint64_t kRelayedOpTag = 0x42505352ull << 32;  // "BPSR"

uint64_t NowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
}

std::string ShapeString(const bps_tensor& t) {
  std::ostringstream s;
  s << "[";
  if (t.shape && t.ndim > 0) {
    for (int i = 0; i < t.ndim; ++i) s << (i ? ", " : "") << t.shape[i];
  } else {
    s << t.num_elements;
  }
  s << "]";
  return s.str();
}

// What local ranks compare in shared memory and servers across machines.
uint64_t SignatureOf(DataType dtype, const std::string& shape, bool average) {
  return HashName(std::string(DataTypeName(dtype)) + shape + (average ? " average" : " sum"));
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
  shutting_down_ = false;
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
  if (options_.colocated_servers && c.distributed() && c.num_server == 0 && c.local_rank == 0) {
    colocated_server_.reset(new Server(c, store_, c.worker_id, options_.colocated_server_host));
    BPS_RETURN_IF_ERROR(colocated_server_->Start());
  }
  BPS_RETURN_IF_ERROR(RendezvousWorkers(store_.get(), &config_));
  BPS_RETURN_IF_ERROR(SetUpLocalReducer());
  BPS_RETURN_IF_ERROR(ConnectServers());
  // BYTEPS_SCHEDULING_CREDIT counts partitions of BYTEPS_PARTITION_BYTES.
  credits_.SetBudget(config_.scheduling_credit > 0
                         ? static_cast<uint64_t>(config_.scheduling_credit) * static_cast<uint64_t>(config_.partition_bytes)
                         : 0);
  last_peer_check_ = Clock::now();
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
                << num_servers_ << (colocated_server_ ? " colocated" : "") << " servers)";
  if (rank() == 0) BPS_LOG(Info) << "configuration: " << ConfigSummary(config_);
  return Status::OK();
}

Status Engine::SetUpLocalReducer() {
  if (config_.local_size == 1) return Status::OK();
  return CreateLocalReducer(options_.local_reducer, config_, store_.get(), &reducer_);
}

Status Engine::WaitForServer(int server, std::string* addr) {
  // Saying every few seconds (once per machine) what it waits for.
  const auto started = std::chrono::steady_clock::now();
  return GetInSlices(store_.get(), "server/" + std::to_string(server), config_.rendezvous_timeout_seconds,
                     kWaitNoteSeconds,
                     [&] {
                       if (config_.local_rank == 0) {
                         BPS_LOG(Warning) << "waiting for server " << server << " of " << num_servers_
                                          << " to register (" << server << " registered so far); still waiting "
                                          << WaitProgress(started, config_.rendezvous_timeout_seconds)
                                          << "; check DMLC_NUM_SERVER and that the servers started";
                       }
                       return true;
                     },
                     addr);
}

Status Engine::ConnectServers() {
  server_conns_.assign(num_servers_, {});
  server_addresses_.assign(num_servers_, "");
  for (int i = 0; i < num_servers_; ++i) {
    std::string addr;
    Status st = WaitForServer(i, &addr);
    if (st.code() == BPS_TIMEOUT) {
      return Status::Timeout("server " + std::to_string(i) + " of " + std::to_string(num_servers_) +
                             " never registered within " + std::to_string(static_cast<int>(config_.rendezvous_timeout_seconds)) +
                             " s (check DMLC_NUM_SERVER and that the servers started)");
    }
    BPS_RETURN_IF_ERROR(st);
    server_addresses_[i] = addr;
    transport::Handlers handlers;
    handlers.unexpected = [this](transport::Connection* c, const MessageHeader& h, const std::string& payload) {
      OnUnexpected(c, h, payload);
    };
    handlers.closed = [this](transport::Connection* c, const Status& reason) { OnServerClosed(c, reason); };
    for (int k = 0; k < config_.connections_per_server; ++k) {
      std::shared_ptr<transport::Connection> conn;
      BPS_RETURN_IF_ERROR(transport_->Connect(addr, "server " + std::to_string(i) + " (" + addr + ")",
                                              config_.rendezvous_timeout_seconds, handlers, &conn));
      server_conns_[i].push_back(conn);
    }
  }
  return Status::OK();
}

Status Engine::EnsureDeviceReducer(int device) {
  std::lock_guard<std::mutex> lock(device_mu_);
  if (device_reducer_) {
    if (device == device_) return Status::OK();
    return Status::Invalid("this process pushes GPU tensors from cuda:" + std::to_string(device_) +
                           " but got one on cuda:" + std::to_string(device) +
                           ": byteps runs one GPU per process (the local rank's)");
  }
  DeviceReducerFactory factory = GetDeviceReducerFactory();
  if (!factory) {
    return Status::Invalid("it is on CUDA device " + std::to_string(device) +
                           " but this engine was built without CUDA (see `python -m byteps_native.info`)");
  }
  MachineLink link;
  link.order = reducer_ ? reducer_->order_channel() : nullptr;
  link.ring = [this] { Ring(); };
  BPS_RETURN_IF_ERROR(factory(config_, store_.get(), device, link, &device_reducer_).WithContext(
      "setting up the device reducer among the " + std::to_string(config_.local_size) + " local ranks of machine " +
      std::to_string(config_.worker_id)));
  device_ = device;
  device_reducer_live_ = device_reducer_.get();
  BPS_LOG(Info) << "device tensors on cuda:" << device << " reduce through '" << device_reducer_->name() << "' among "
                << config_.local_size << " local ranks"
                << (config_.distributed() ? ", then across machines through the servers" : "");
  return Status::OK();
}

bool Engine::DeviceStreamOrdered() const {
  return initialized_ && !config_.distributed() && GetDeviceReducerFactory() != nullptr;
}

LocalContribution Engine::ContributionOf(const TensorOp& op, const PartitionTask* t) const {
  const size_t esz = DataTypeSize(op.dtype);
  const Range range = t ? t->range : Range{0, op.count};
  LocalContribution c;
  c.input = op.input + range.offset * esz;
  c.output = op.output + range.offset * esz;
  c.count = range.count;
  c.dtype = op.dtype;
  c.signature = op.signature;
  c.tensor_bytes = static_cast<uint64_t>(op.count) * esz;
  c.name = op.name.c_str();
  c.shape = op.shape_and_op.c_str();
  c.divisor = op.average ? config_.size() : 1;
  c.device = op.device;
  c.ready_event = op.ready_event;
  c.priority = op.priority;
  c.submit_seq = op.seq;
  c.partition = t ? t->index : 0;
  return c;
}

Status Engine::Submit(const bps_tensor& input, void* output, const std::string& name, int32_t priority,
                      int32_t reduce_op, bps_done_fn done, void* user_data, void* stream) {
  if (!initialized_) return Status(BPS_NOT_INITIALIZED, "byteps is not initialised: call init() first");
  if (has_fatal_) {
    std::lock_guard<std::mutex> lock(fatal_mu_);
    return fatal_;
  }
  BPS_RETURN_IF_ERROR(ValidatePushPull(input, output, name, reduce_op, done));
  auto op = std::make_unique<TensorOp>();
  op->failure = Status::OK();
  op->name = name;
  op->name_hash = HashName(name);
  op->input = static_cast<const char*>(input.data);
  op->output = static_cast<char*>(output);
  op->dtype = static_cast<DataType>(input.dtype);
  op->count = input.num_elements;
  op->shape = ShapeString(input);
  op->signature = SignatureOf(op->dtype, op->shape, reduce_op == BPS_REDUCE_AVERAGE);
  op->priority = priority;
  op->average = reduce_op == BPS_REDUCE_AVERAGE;
  op->shape_and_op = op->shape + (op->average ? " (average)" : " (sum)");
  op->done = done;
  op->user_data = user_data;
  op->device = input.device >= 0 ? input.device : -1;
  op->reducer = reducer_.get();
  if (op->device >= 0) {
    BPS_RETURN_IF_ERROR(EnsureDeviceReducer(op->device).WithContext("tensor '" + name + "'"));
    op->reducer = device_reducer_.get();
    BPS_RETURN_IF_ERROR(op->reducer->RecordReady(stream, &op->ready_event));
    if (!config_.distributed()) {
      // One machine: one fused collective, launched now in this rank's
      // submission order and stream-ordered for the caller.
      Status st = op->reducer->LaunchFused(ContributionOf(*op, nullptr), stream, &op->fused_handle);
      if (!st.ok()) {
        op->reducer->ReturnReady(op->ready_event);
        return st.WithContext("push_pull of '" + name + "'");
      }
      op->fused = true;
    }
  }
  {
    // Checked under the lock the engine thread drains with: once Shutdown
    // stopped accepting, nothing is enqueued that the thread would miss.
    std::lock_guard<std::mutex> lock(submit_mu_);
    if (!accepting_) return Status(BPS_NOT_INITIALIZED, "byteps is not initialised: call init() first");
    op->seq = next_seq_++;
    submitted_.push_back(std::move(op));
  }
  stats_.queue_depth++;
  Ring();
  return Status::OK();
}

void Engine::Ring() {
  if (reducer_) {
    reducer_->Ring();
  } else {
    local_doorbell_.fetch_add(1);
    FutexWakeAll(&local_doorbell_);
  }
}

void Engine::Activate(std::unique_ptr<TensorOp> op) {
  const size_t esz = DataTypeSize(op->dtype);
  LocalReducer* R = op->reducer;
  const std::vector<Range> ranges =
      op->fused ? std::vector<Range>{Range{0, op->count}}
      : R       ? R->PlanPartitions(op->count, static_cast<int64_t>(esz), config_.partition_bytes, num_servers_)
                : PlanPartitions(op->count, static_cast<int64_t>(esz), config_.partition_bytes, 1, num_servers_);
  TensorOp* raw = op.get();
  // After a mismatch every rank uses fresh keys for the name (shared-memory
  // entries, server rounds): the failed round's leftovers cannot block it.
  const auto generation = mismatch_generation_.find(raw->name_hash);
  if (generation != mismatch_generation_.end()) raw->name_hash = MixKey(raw->name_hash, generation->second, 0xfffe);
  raw->name_op = ops_of_name_[raw->name_hash]++;
  for (size_t i = 0; i < ranges.size(); ++i) {
    auto t = std::make_unique<PartitionTask>();
    t->op = raw;
    t->index = static_cast<uint32_t>(i);
    t->range = ranges[i];
    t->local_key = MixKey(raw->name_hash, t->index, 0xffff);
    t->last_progress = Clock::now();
    if (raw->fused) {
      // Launched at submission: only its completion is left to see.
      t->entry = raw->fused_handle;
      t->stage = Stage::kGather;
    } else {
      t->round = next_round_[t->local_key]++;
    }
    raw->parts.push_back(std::move(t));
  }
  raw->remaining = static_cast<int>(raw->parts.size());
  // Every machine sends a tensor's partitions in the same order: partition p
  // then completes on its server as early as possible, so replies flow while
  // later pushes are still going out. Consecutive partitions go to different
  // servers (ServerFor), so a credit window of >= servers partitions keeps
  // every server link busy.
  for (auto& t : raw->parts) active_.Insert(PartitionOrder{raw->priority, raw->seq, t->index}, t.get());
  ops_.push_back(std::move(op));
}

void Engine::Loop() {
  while (true) {
    uint32_t seen = reducer_ ? reducer_->Doorbell() : local_doorbell_.load();
    std::deque<std::unique_ptr<TensorOp>> fresh;
    {
      std::lock_guard<std::mutex> lock(submit_mu_);
      fresh.swap(submitted_);
    }
    for (auto& op : fresh) Activate(std::move(op));
    FailTensorsReportedByServers();
    // Failed partitions stay active until their I/O stopped and their round
    // closed, so this also waits for every buffer to be released.
    if (!running_ && active_.empty()) break;

    bool moved = !fresh.empty();
    const bool stopping = has_fatal_ || !running_;
    if (stopping) {
      Status st;
      {
        std::lock_guard<std::mutex> lock(fatal_mu_);
        st = has_fatal_ ? fatal_ : Status::Shutdown("byteps shut down while the operation was pending");
      }
      for (auto& op : ops_) FailOp(op.get(), st);
    }
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
    if (LocalReducer* device = device_reducer_live_.load()) moved |= device->Progress();
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
      if (reducer_) {
        reducer_->WaitDoorbell(seen, 50);
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
    const std::string msg = "push_pull of '" + op->name + "' failed: byteps shut down while the operation was pending";
    op->done(op->user_data, BPS_SHUTDOWN, msg.c_str());
  }
}

bool Engine::Advance(PartitionTask& t) {
  TensorOp* op = t.op;
  // The local reducer of this op; null: one local rank, host memory (no local stage).
  LocalReducer* R = op->reducer;
  const size_t esz = DataTypeSize(op->dtype);
  const bool distributed = config_.distributed();
  const int64_t divisor = op->average ? config_.size() : 1;
  const char* in = op->input + t.range.offset * esz;
  char* out = op->output + t.range.offset * esz;
  bool moved = false;
  LocalContribution mine;
  if (R) mine = ContributionOf(*op, &t);

  if (t.stage == Stage::kWaitTurn) {
    // Rounds of one key run in submission order on this rank.
    if (done_round_[t.local_key] != t.round) return false;
    if (R) {
      Status st = R->Acquire(t.local_key, t.range.count * esz, op->dtype, &t.entry);
      if (!st.ok()) {
        st = Status(st.code(), "tensor '" + op->name + "' (" + DataTypeName(op->dtype) + " " + op->shape +
                                   " on rank " + std::to_string(rank()) + ") partition " + std::to_string(t.index) +
                                   ": " + st.message());
        // make the other local ranks fail too, not time out
        if (t.entry) R->FailRound(t.entry, t.round, st);
        FailOp(op, st);
        return true;
      }
      // Every entry is in use by partitions in flight: they finish (on this
      // rank and the others) and free one; the watchdog bounds the wait.
      if (!t.entry) return false;
    }
    t.stage = Stage::kStage;
    moved = true;
  }

  LocalPartition* e = t.entry;

  if (t.stage == Stage::kStage) {
    if (!R) {
      t.stage = distributed ? Stage::kPush : Stage::kGather;
    } else {
      uint64_t t0 = NowNs();
      const uint64_t w0 = timeline_.Tracing(t.round) ? Timeline::NowMicros() : 0;
      if (R->StageIn(e, t.round, mine) == LocalProgress::kWaiting) return moved;
      stats_.stage_ns += NowNs() - t0;
      if (w0) timeline_.Record(op->name, t.index, t.round, "stage_in", w0, Timeline::NowMicros());
      t.staged = true;
      t.stage = Stage::kReduce;
    }
    moved = true;
  }

  if (t.stage == Stage::kReduce) {
    uint64_t t0 = NowNs();
    const uint64_t w0 = timeline_.Tracing(t.round) ? Timeline::NowMicros() : 0;
    LocalProgress progress;
    Status st = R->ReduceOwnSlice(e, t.round, mine, distributed ? nullptr : out, divisor, &progress);
    if (!st.ok()) {
      FailOp(op, st);
      return true;
    }
    if (progress == LocalProgress::kWaiting) return moved;
    stats_.local_reduce_ns += NowNs() - t0;
    if (w0) timeline_.Record(op->name, t.index, t.round, "local_reduce", w0, Timeline::NowMicros());
    if (distributed) {
      t.stage = Stage::kPush;
    } else {
      R->PublishOwnSlice(e, t.round);
      t.gathered_mask |= 1u << config_.local_rank;
      t.stage = Stage::kGather;
    }
    moved = true;
  }

  if (t.stage == Stage::kPush) {
    Range s = R ? R->SliceOf(t.range.count, config_.local_rank) : Range{0, t.range.count};
    if (s.count == 0 && t.range.count > 0) {
      // Empty slice: empty on every machine too (same plan), nothing to send.
      if (e) R->PublishOwnSlice(e, t.round);
      t.stage = Stage::kGather;
      return true;
    }
    const uint64_t bytes = static_cast<uint64_t>(s.count) * esz;
    if (!credits_.TryAdmit(bytes)) return moved;  // wait for queued bytes to leave
    const char* src = e ? R->OwnSlice(e, mine) : in;
    char* dst = e ? R->OwnSlice(e, mine) : out;
    SendPush(t, src, bytes, dst);
    t.stage = Stage::kAwait;
    moved = true;
  }

  if (t.stage == Stage::kAwait) {
    int state = t.pull->state.load(std::memory_order_acquire);
    if (state == 0) return moved;
    // The push's on_sent may still be pending: the input is read until then.
    if (state == 1 && t.io->in_flight.load(std::memory_order_acquire) != 0) return moved;
    if (state == 2) {
      op->mismatch_from_server = true;
      FailOp(op, Status::Mismatch("tensor '" + op->name + "' (" + DataTypeName(op->dtype) + " " + op->shape +
                                  " on rank " + std::to_string(rank()) + "): " + t.pull->error));
      return true;
    }
    stats_.bytes_pulled += t.pull->bytes;
    if (t.net_start_us) timeline_.Record(op->name, t.index, t.round, "push_pull", t.net_start_us, Timeline::NowMicros());
    if (e) R->PublishOwnSlice(e, t.round);
    t.stage = Stage::kGather;
    moved = true;
  }

  if (t.stage == Stage::kGather) {
    uint64_t t0 = NowNs();
    const uint64_t w0 = timeline_.Tracing(t.round) ? Timeline::NowMicros() : 0;
    if (!R) {
      if (distributed) {
        if (divisor != 1) CopyScaled(out, out, t.range.count, op->dtype, divisor);
      } else {
        CopyScaled(out, in, t.range.count, op->dtype, divisor);
      }
      FinishPartition(t);
      stats_.gather_ns += NowNs() - t0;
      if (w0) timeline_.Record(op->name, t.index, t.round, "gather", w0, Timeline::NowMicros());
      return true;
    }
    const uint32_t before = t.gathered_mask;
    LocalProgress progress;
    Status st = R->Gather(e, t.round, mine, out, divisor, &t.gathered_mask, &progress);
    if (!st.ok()) {
      FailOp(op, st);
      return true;
    }
    moved |= t.gathered_mask != before;
    stats_.gather_ns += NowNs() - t0;
    if (w0 && moved) timeline_.Record(op->name, t.index, t.round, "gather", w0, Timeline::NowMicros());
    if (progress == LocalProgress::kDone) {
      FinishPartition(t);
      return true;
    }
  }
  return moved;
}

void Engine::SendPush(PartitionTask& t, const char* data, uint64_t bytes, char* dst) {
  TensorOp* op = t.op;
  const int L = config_.local_size;
  const int slice = op->reducer ? config_.local_rank : 0;
  t.net_key = MixKey(op->name_hash, t.index, static_cast<uint32_t>(slice));
  t.server = ServerFor(op->name_hash, t.index, slice, L, num_servers_);
  auto& conns = server_conns_[t.server];
  transport::Connection* conn = conns[t.net_key % conns.size()].get();
  auto pull = std::make_shared<PendingPull>();
  pull->dst = dst;
  pull->bytes = bytes;
  pull->round = t.round;
  pull->io = t.io;
  pull->conn = conn;
  t.pull = pull;
  t.io->in_flight.fetch_add(2, std::memory_order_acq_rel);  // the receive and the push below
  t.net_start_us = timeline_.Tracing(t.round) ? Timeline::NowMicros() : 0;
  {
    std::lock_guard<std::mutex> lock(net_mu_);
    pending_[t.net_key] = pull;
  }
  // Posted before the push leaves: the answer may come at once.
  const uint64_t key = t.net_key;
  conn->PostReceive(key, t.round, dst, bytes, [this, pull, key](const Status& st) {
    // Not OK: cancelled (the op failed), an error frame (state already 2),
    // or the connection was lost (the engine fails as a whole).
    if (st.ok()) pull->state.store(1, std::memory_order_release);
    {
      std::lock_guard<std::mutex> lock(net_mu_);
      auto it = pending_.find(key);
      if (it != pending_.end() && it->second == pull) pending_.erase(it);
    }
    pull->Release();
    Ring();
  });
  MessageHeader h;
  h.type = static_cast<uint16_t>(MessageType::kPush);
  h.key = t.net_key;
  h.name_hash = op->name_hash;
  h.round = t.round;
  h.partition = t.index;
  h.payload_bytes = bytes;
  h.sender_rank = static_cast<uint32_t>(rank());
  h.dtype = static_cast<uint8_t>(op->dtype);
  h.num_contributors = static_cast<uint16_t>(config_.num_worker);
  h.flags = (op->average ? kFlagAverage : 0) | (config_.enable_async ? kFlagAsync : 0);
  h.signature = static_cast<uint32_t>(op->signature);
  h.partition_bytes = static_cast<uint32_t>(config_.partition_bytes);
  h.tensor_bytes = static_cast<uint64_t>(op->count) * DataTypeSize(op->dtype);
  stats_.bytes_pushed += bytes;
  if (t.server < EngineStats::kMaxTrackedServers) stats_.bytes_per_server[t.server] += bytes;
  conn->Send(h, data, [this, io = t.io, bytes](const Status&) {
    credits_.Release(bytes);
    io->in_flight.fetch_sub(1, std::memory_order_acq_rel);
    Ring();
  });
}

void Engine::FailTensorsReportedByServers() {
  std::vector<TensorError> errors;
  {
    std::lock_guard<std::mutex> lock(net_mu_);
    if (tensor_errors_.empty()) return;
    errors.swap(tensor_errors_);
  }
  for (auto& error : errors) {
    for (auto& op : ops_) {
      // Earlier ops of the name completed on the servers; only a slower
      // machine still finishes them (issue 20 item 5: a size change that one
      // machine's ranks disagreed on failed the op before it on the other).
      if (op->failed || op->name_hash != error.name_hash || op->name_op < error.first_op) continue;
      op->mismatch_from_server = true;
      FailOp(op.get(), Status::Mismatch("tensor '" + op->name + "' (" + DataTypeName(op->dtype) + " " + op->shape +
                                        " on rank " + std::to_string(rank()) + "): " + error.why));
    }
  }
}

void Engine::FinishPartition(PartitionTask& t) {
  t.stage = Stage::kDone;
  TensorOp* op = t.op;
  if (t.entry) op->reducer->ReleasePartition(t.entry);
  t.entry = nullptr;
  if (!op->fused) done_round_[t.local_key] = t.round + 1;
  stats_.partitions_completed++;
  if (--op->remaining == 0 && !op->failed) {
    stats_.ops_completed++;
    stats_.queue_depth--;
    if (op->ready_event) op->reducer->ReturnReady(op->ready_event);
    op->ready_event = nullptr;
    op->done(op->user_data, BPS_OK, "");
  }
}

void Engine::FailOp(TensorOp* op, const Status& st) {
  if (op->failed || op->remaining == 0) return;
  op->failed = true;
  std::string msg = st.message();
  if (msg.find("'" + op->name + "'") == std::string::npos) msg = "push_pull of '" + op->name + "' failed: " + msg;
  op->failure = Status(st.code(), msg);
  if (st.code() == BPS_MISMATCH) OnTensorMismatch(op);
  op->unretired = 0;
  for (auto& t : op->parts) op->unretired += t->stage != Stage::kDone;
  // Cancel every pull of the op: its receive's callback (which releases it)
  // runs only once nothing more can land in its buffer. done() waits for it.
  for (auto& t : op->parts) {
    if (t->pull && !t->pull->released.load()) t->pull->conn->CancelReceive(t->net_key);
  }
}

void Engine::OnTensorMismatch(TensorOp* op) {
  // Every rank's op of this round fails with the mismatch (the servers and
  // shared memory tell them all), so every rank moves to the same generation.
  ++mismatch_generation_[HashName(op->name)];
  if (op->mismatch_from_server) return;  // the server already told everyone
  // Tell the other machines through every server: ranks that wait there for
  // this round fail now, naming it, instead of timing out.
  auto text = std::make_shared<std::string>(op->failure.message().substr(0, kMaxErrorPayloadBytes));
  for (auto& conns : server_conns_) {
    if (conns.empty()) continue;
    MessageHeader h;
    h.type = static_cast<uint16_t>(MessageType::kError);
    h.flags = kFlagTensorError;
    h.key = kRelayedOpTag | op->name_op;  // servers pass the key on unchanged
    h.name_hash = op->name_hash;
    h.payload_bytes = text->size();
    conns[0]->Send(h, text->data(), [text](const Status&) {});
  }
}

bool Engine::RetireFailed(PartitionTask& t) {
  if (t.io->in_flight.load(std::memory_order_acquire) != 0) return false;
  TensorOp* op = t.op;
  LocalReducer* R = op->reducer;
  if (op->fused) {
    // Its collective runs to the end (or the abort) before the buffers go back.
    if (!R->Settled(t.entry, t.round)) return false;
    R->ReleasePartition(t.entry);
    t.entry = nullptr;
    t.stage = Stage::kDone;
    op->unretired--;
    return true;
  }
  uint32_t& closed = done_round_[t.local_key];
  if (closed != t.round) return false;  // an earlier round of this name is still open
  if (R) {
    if (!t.closed_round) {
      R->CloseFailedRound(t.entry, t.local_key, t.range.count * DataTypeSize(op->dtype), op->dtype, t.round,
                          op->failure, t.staged);
      t.closed_round = true;
    }
    // Device collectives of the round already issued (or still to be
    // decided) finish first: nobody writes into the buffers after done().
    if (!R->Settled(t.entry, t.round)) return false;
    if (t.entry) R->ReleasePartition(t.entry);
    t.entry = nullptr;
  }
  closed = t.round + 1;
  t.stage = Stage::kDone;
  op->unretired--;
  return true;
}

void Engine::CompleteFailedOp(TensorOp* op) {
  stats_.queue_depth--;
  if (op->ready_event) op->reducer->ReturnReady(op->ready_event);
  op->ready_event = nullptr;
  bps_done_fn done = op->done;
  op->done = nullptr;  // marks the op complete
  done(op->user_data, op->failure.code(), op->failure.message().c_str());
}

void Engine::Fail(const Status& why) { SetFatal(why); }

Status Engine::failure() {
  std::lock_guard<std::mutex> lock(fatal_mu_);
  return has_fatal_ ? fatal_ : Status::OK();
}

void Engine::SetFatal(const Status& st) {
  {
    std::lock_guard<std::mutex> lock(fatal_mu_);
    if (has_fatal_) return;
    fatal_ = st;
    has_fatal_ = true;
  }
  BPS_LOG(Error) << st.message();
  if (reducer_) reducer_->FailMachine(st.message());
  // No rank stays inside a device collective whose peers will not issue it.
  if (LocalReducer* device = device_reducer_live_.load()) device->FailMachine(st.message());
  Ring();
}

void Engine::OnUnexpected(transport::Connection* conn, const MessageHeader& h, const std::string& payload) {
  if (h.type != static_cast<uint16_t>(MessageType::kError)) return;  // e.g. the answer of a cancelled pull
  if (h.flags & kFlagTensorError) {
    // Fails every op of that tensor (this generation), on the engine thread.
    // A worker's relay names the op it failed (kRelayedOpTag); a server's own
    // finding concerns every pending op of the name.
    const bool relayed = (h.key & ~uint64_t{0xffffffff}) == kRelayedOpTag;
    std::lock_guard<std::mutex> lock(net_mu_);
    tensor_errors_.push_back(TensorError{h.name_hash, relayed ? static_cast<uint32_t>(h.key) : 0, payload});
  }
  if (h.key == 0) {
    SetFatal(Status::PeerFailure(payload + " (reported by " + conn->peer_name() + ")"));
    return;
  }
  std::shared_ptr<PendingPull> pull;
  {
    std::lock_guard<std::mutex> lock(net_mu_);
    auto it = pending_.find(h.key);
    if (it != pending_.end()) pull = it->second;
  }
  if (!pull) return;
  pull->error = payload;
  pull->state.store(2, std::memory_order_release);
  pull->conn->CancelReceive(h.key);  // its callback releases the pull
  Ring();
}

void Engine::OnServerClosed(transport::Connection* conn, const Status& reason) {
  Ring();
  if (shutting_down_) return;
  SetFatal(Status::PeerFailure("lost " + conn->peer_name() + ": " + reason.message()));
}

Status Engine::Shutdown() {
  if (!initialized_) return Status::OK();
  {
    std::lock_guard<std::mutex> lock(submit_mu_);
    accepting_ = false;
  }
  shutting_down_ = true;
  running_ = false;
  Ring();
  if (thread_.joinable()) thread_.join();
  timeline_.Finish();
  // A failed process does not leave "in order": it tells the servers why, and
  // they relay the root cause to every other worker.
  const bool failed = has_fatal_;
  std::string why;
  if (failed) {
    std::lock_guard<std::mutex> lock(fatal_mu_);
    why = fatal_.message();
  }
  auto text = std::make_shared<std::string>(why.substr(0, kMaxErrorPayloadBytes));
  for (auto& conns : server_conns_) {
    for (auto& c : conns) {
      MessageHeader h;
      if (failed) {
        h.type = static_cast<uint16_t>(MessageType::kError);
        h.payload_bytes = text->size();
      } else {
        h.type = static_cast<uint16_t>(MessageType::kBye);
      }
      c->Send(h, text->data(), [text](const Status&) {});
    }
  }
  Status result;
  if (colocated_server_) {
    // Other machines may still be pushing to our server: serve them out.
    result = colocated_server_->Wait(config_.timeout_seconds);
  }
  ReleaseResources();
  return result;
}

void Engine::ReleaseResources() {
  shutting_down_ = true;  // connection closes below are not failures
  {
    std::lock_guard<std::mutex> lock(submit_mu_);
    accepting_ = false;
  }
  running_ = false;
  if (thread_.joinable()) {  // only when a step after the thread's start failed
    Ring();
    thread_.join();
  }
  if (colocated_server_) {
    colocated_server_->Stop();
    colocated_server_.reset();
  }
  for (auto& conns : server_conns_) {
    for (auto& c : conns) c->Close(Status::Shutdown("shutdown"));
  }
  server_conns_.clear();
  transport_.reset();  // stops its I/O thread
  {
    std::lock_guard<std::mutex> lock(net_mu_);
    pending_.clear();
  }
  // The device reducer first: its order channel lives in the host reducer's
  // shared memory.
  device_reducer_live_ = nullptr;
  device_reducer_.reset();
  if (reducer_) {
    reducer_->Leave();
    reducer_.reset();
  }
  store_.reset();
  initialized_ = false;
}

}  // namespace bps
