#include "core/engine.h"

#include <signal.h>
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
#include "common/sha256.h"
#include "store/c_store.h"
#include "store/memory_store.h"
#include "store/job_secret.h"
#include "transport/handshake.h"

namespace bps {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t NowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
}

// A dead child stays a zombie until its launcher reaps it (torchrun may take
// seconds): kill(pid, 0) still succeeds then, so read its state too.
bool ProcessAlive(int pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = fopen(path, "r");
  if (!f) return true;  // no procfs: trust kill()
  char buf[512] = {0};
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  const char* close_paren = strrchr(buf, ')');  // comm may contain spaces
  if (n == 0 || !close_paren || close_paren[1] == '\0') return true;
  const char state = close_paren[2];
  return state != 'Z' && state != 'X';
}

std::string RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  SecureRandom(&raw[0], bytes);
  return ToHex(raw.data(), raw.size());
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

uint64_t SignatureOf(DataType dtype, const std::string& shape) {
  return HashName(std::string(DataTypeName(dtype)) + shape);
}

// Where this process's servers should listen / be reached.
std::string ChooseListenHost(const Config& c, const std::string& fallback_route) {
  if (!c.node_host.empty()) return c.node_host;
  if (!c.interface.empty()) {
    std::string addr;
    if (InterfaceAddress(c.interface, &addr).ok()) return addr;
  }
  if (!fallback_route.empty()) return fallback_route;
  const char* master = getenv("MASTER_ADDR");
  if (master) {
    std::string route = RouteAddressTo(master);
    if (!route.empty()) return route;
  }
  return "127.0.0.1";
}

// Keys of an adapter-supplied store (torch's) live under bps/<attempt>/: each
// torchrun restart rendezvouses afresh. Dedicated servers use the same prefix.
std::shared_ptr<Store> AdapterStore(const bps_store& vtable) {
  const char* restart = getenv("TORCHELASTIC_RESTART_COUNT");
  std::string prefix = "bps/" + std::string(restart && *restart ? restart : "0") + "/";
  return std::make_shared<PrefixStore>(prefix, std::make_shared<CStore>(vtable));
}

// The first member to arrive publishes `proposal` under `key`; everyone
// (the first included) reads back the one published value.
Status PublishOnce(Store* store, const std::string& key, const std::string& proposal, double timeout_seconds,
                   std::string* value) {
  int64_t claim = 0;
  BPS_RETURN_IF_ERROR(store->Add(key + "_claim", 1, &claim));
  if (claim == 1) BPS_RETURN_IF_ERROR(store->Set(key, proposal));
  return store->Get(key, timeout_seconds, value);
}

// Servers take ids in registration order; more than DMLC_NUM_SERVER is an error.
Status ClaimServerId(Store* store, const Config& config, int* id) {
  int64_t count = 0;
  BPS_RETURN_IF_ERROR(store->Add("server_count", 1, &count));
  if (count > config.num_server) {
    return Status::Invalid("more servers started than DMLC_NUM_SERVER=" + std::to_string(config.num_server));
  }
  *id = static_cast<int>(count - 1);
  return Status::OK();
}

}  // namespace

namespace {
DeviceSubmitFn g_device_submit = nullptr;
}  // namespace

void SetDeviceSubmitHandler(DeviceSubmitFn fn) { g_device_submit = fn; }

namespace {
DeviceStreamOrderedFn g_stream_ordered = nullptr;
}  // namespace

void SetDeviceStreamOrderedQuery(DeviceStreamOrderedFn fn) { g_stream_ordered = fn; }
bool DeviceStreamOrdered() { return g_stream_ordered != nullptr && Engine::Get().initialized() && g_stream_ordered(); }

Engine& Engine::Get() {
  static Engine* engine = new Engine();  // never destroyed: threads may outlive statics
  return *engine;
}

Status Engine::Init(const bps_init_options* options) {
  if (initialized_) return Status::OK();
  const bool have_store = options && options->store;
  Config c;
  BPS_RETURN_IF_ERROR(ConfigFromEnvironment(false, &c));
  if (c.role != Role::kWorker) {
    return Status::Invalid(std::string("init() called in a process with DMLC_ROLE=") + RoleName(c.role) +
                           ": servers and schedulers run bps_run_server / bps_run_scheduler");
  }
  if (options) {
    if (options->local_size > 0) c.local_size = options->local_size;
    if (options->local_rank >= 0) c.local_rank = options->local_rank;
    if (options->size > 0) {
      if (options->size % c.local_size != 0) {
        return Status::Invalid("world size " + std::to_string(options->size) + " is not a multiple of local size " +
                               std::to_string(c.local_size) + ": every machine must run the same number of ranks");
      }
      c.num_worker = options->size / c.local_size;
    }
    if (options->rank >= 0) {
      if (options->rank % c.local_size != c.local_rank) {
        return Status::Invalid("rank " + std::to_string(options->rank) + " is not local rank " +
                               std::to_string(c.local_rank) + " of a machine with " + std::to_string(c.local_size) +
                               " ranks: ranks must be numbered machine by machine");
      }
      c.worker_id = options->rank / c.local_size;
    }
  }
  if (c.local_size > kMaxLocalRanks) {
    return Status::Invalid("local size " + std::to_string(c.local_size) + " exceeds the supported " +
                           std::to_string(kMaxLocalRanks));
  }
  if (c.worker_id >= c.num_worker) {
    return Status::Invalid("machine index " + std::to_string(c.worker_id) + " must be < " + std::to_string(c.num_worker));
  }
  config_ = c;
  SetLogIdentity("worker " + std::to_string(c.rank()));

  std::string route_to_scheduler;
  if (have_store) {
    store_ = AdapterStore(*options->store);
    BPS_RETURN_IF_ERROR(ShareJobSecret(store_.get(), &config_));
  } else if (config_.size() == 1 && !config_.force_distributed) {
    store_ = std::make_shared<MemoryStore>();
  } else {
    if (config_.root_uri.empty() || config_.root_port == 0) {
      return Status::Invalid(
          "this job has " + std::to_string(config_.size()) +
          " ranks but no rendezvous: set DMLC_PS_ROOT_URI and DMLC_PS_ROOT_PORT (the scheduler), launch with "
          "bpslaunch, or use torch.distributed.init_process_group('byteps')");
    }
    HostPort at{c.root_uri, c.root_port};
    BPS_RETURN_IF_ERROR(TcpStoreClient::Connect(at, c.job_token, Role::kWorker, c.rank(),
                                                c.rendezvous_timeout_seconds, c.timeout_seconds,
                                                &scheduler_client_));
    route_to_scheduler = scheduler_client_->local_address();
    store_ = std::shared_ptr<Store>(scheduler_client_.get(), [](Store*) {});
    StartAbortWatcher(at);
  }

  if (config_.distributed()) {
    if (config_.num_server > 0) {
      num_servers_ = config_.num_server;
    } else if (have_store) {
      colocated_servers_ = true;  // plain torchrun: one server per machine
      num_servers_ = config_.num_worker;
    } else {
      return Status::Invalid("DMLC_NUM_WORKER=" + std::to_string(config_.num_worker) +
                             " machines need parameter servers, but DMLC_NUM_SERVER=0");
    }
  }
  if (colocated_servers_ && config_.local_rank == 0) {
    colocated_server_.reset(new Server(config_, store_, config_.worker_id, ChooseListenHost(config_, route_to_scheduler)));
    BPS_RETURN_IF_ERROR(colocated_server_->Start());
  }
  BPS_RETURN_IF_ERROR(Rendezvous());
  BPS_RETURN_IF_ERROR(SetUpSharedMemory());
  io_loop_.reset(new EventLoop("worker-io"));
  io_loop_->Start();
  BPS_RETURN_IF_ERROR(ConnectServers());
  credits_ = config_.scheduling_credit > 0 ? config_.scheduling_credit : (1 << 30);
  last_peer_check_ = Clock::now();
  last_stats_log_ = Clock::now();
  timeline_.Configure("worker " + std::to_string(rank()), "rank" + std::to_string(rank()));
  running_ = true;
  shutting_down_ = false;
  thread_ = std::thread([this] { Loop(); });
  initialized_ = true;
  BPS_LOG(Info) << "initialised rank " << rank() << " of " << size() << " (local " << config_.local_rank << "/"
                << config_.local_size << ", machine " << config_.worker_id << "/" << config_.num_worker << ", "
                << num_servers_ << (colocated_servers_ ? " colocated" : "") << " servers)";
  return Status::OK();
}

void Engine::StartAbortWatcher(const HostPort& scheduler) {
  Status st = TcpStoreClient::Connect(scheduler, config_.job_token, Role::kWorker, config_.rank(), 30, config_.timeout_seconds,
                                      &abort_watch_client_);
  if (!st.ok()) return;
  abort_watcher_ = std::thread([this] {
    std::string why;
    while (true) {
      Status s = abort_watch_client_->Get("abort", 3600, &why);
      if (shutting_down_) return;
      if (s.ok()) {
        SetFatal(Status::PeerFailure("job aborted: " + why));
        return;
      }
      if (s.code() != BPS_TIMEOUT) {
        SetFatal(Status::PeerFailure("lost the scheduler " + config_.root_uri + ":" +
                                     std::to_string(config_.root_port) + ": " + s.message()));
        return;
      }
    }
  });
}

Status Engine::Rendezvous() {
  const Config& c = config_;
  if (c.job_id.empty()) {
    BPS_RETURN_IF_ERROR(PublishOnce(store_.get(), "job_id", RandomHex(4), c.rendezvous_timeout_seconds, &config_.job_id));
  }
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  BPS_RETURN_IF_ERROR(store_->Set("worker/" + std::to_string(c.rank()),
                                  std::to_string(c.local_size) + " " + host + " " + std::to_string(getpid())));
  BPS_RETURN_IF_ERROR(store_->Set("size", std::to_string(c.size())));  // servers wait for this many
  int64_t joined = 0;
  BPS_RETURN_IF_ERROR(store_->Add("workers_joined", 1, &joined));
  auto deadline = Clock::now() + std::chrono::duration<double>(c.rendezvous_timeout_seconds);
  for (int q = 0; q < c.size(); ++q) {
    std::string value;
    double left = std::max(0.0, std::chrono::duration<double>(deadline - Clock::now()).count());
    Status st = store_->Get("worker/" + std::to_string(q), left, &value);
    if (st.code() == BPS_TIMEOUT) {
      store_->Add("workers_joined", 0, &joined);
      return Status::Timeout("rendezvous timed out after " + std::to_string(static_cast<int>(c.rendezvous_timeout_seconds)) +
                             " s: " + std::to_string(joined) + " of " + std::to_string(c.size()) +
                             " workers arrived (rank " + std::to_string(q) +
                             " is missing; check DMLC_NUM_WORKER / BYTEPS_LOCAL_SIZE on every machine)");
    }
    BPS_RETURN_IF_ERROR(st);
    int their_local = atoi(value.c_str());
    if (their_local != c.local_size) {
      return Status::Invalid("rank " + std::to_string(q) + " runs with local size " + std::to_string(their_local) +
                             " but this rank with " + std::to_string(c.local_size) +
                             ": every machine must run the same number of local ranks");
    }
  }
  return Status::OK();
}

Status Engine::SetUpSharedMemory() {
  const Config& c = config_;
  if (c.local_size == 1) return Status::OK();
  const std::string machine = std::to_string(c.worker_id);
  if (c.local_rank == 0) {
    BPS_RETURN_IF_ERROR(LocalSharedMemory::Create(config_.job_id, c.worker_id, c.local_size, 0, &shm_));
    BPS_RETURN_IF_ERROR(store_->Set("shm/" + machine, shm_->base_name()));
  } else {
    std::string name;
    BPS_RETURN_IF_ERROR(store_->Get("shm/" + machine, c.rendezvous_timeout_seconds, &name));
    BPS_RETURN_IF_ERROR(LocalSharedMemory::Open(name, c.local_size, &shm_));
  }
  shm_->control()->pids[c.local_rank] = getpid();
  int64_t opened = 0;
  BPS_RETURN_IF_ERROR(store_->Add("shm_opened/" + machine, 1, &opened));
  if (c.local_rank == 0) {
    // Once everyone has mapped the segments their names can go: nothing is
    // left in /dev/shm even if the job is killed later.
    auto deadline = Clock::now() + std::chrono::duration<double>(c.rendezvous_timeout_seconds);
    while (opened < c.local_size) {
      if (Clock::now() > deadline) {
        return Status::Timeout("only " + std::to_string(opened) + " of " + std::to_string(c.local_size) +
                               " local ranks opened the shared memory");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      BPS_RETURN_IF_ERROR(store_->Add("shm_opened/" + machine, 0, &opened));
    }
    shm_->Unlink();
  }
  return Status::OK();
}

Status Engine::ConnectServers() {
  server_conns_.assign(num_servers_, {});
  server_addresses_.assign(num_servers_, "");
  for (int i = 0; i < num_servers_; ++i) {
    std::string addr;
    Status st = store_->Get("server/" + std::to_string(i), config_.rendezvous_timeout_seconds, &addr);
    if (st.code() == BPS_TIMEOUT) {
      return Status::Timeout("server " + std::to_string(i) + " of " + std::to_string(num_servers_) +
                             " never registered within " + std::to_string(static_cast<int>(config_.rendezvous_timeout_seconds)) +
                             " s (check DMLC_NUM_SERVER and that the servers started)");
    }
    BPS_RETURN_IF_ERROR(st);
    HostPort hp;
    BPS_RETURN_IF_ERROR(ParseHostPort(addr, &hp));
    server_addresses_[i] = addr;
    for (int k = 0; k < config_.connections_per_server; ++k) {
      int fd = -1;
      BPS_RETURN_IF_ERROR(ConnectWithRetry(hp, config_.rendezvous_timeout_seconds, &fd)
                              .WithContext("server " + std::to_string(i)));
      SetLivenessProbes(fd, config_.timeout_seconds);
      Status hs = ConnectHandshake(fd, config_.job_token, Role::kWorker, config_.rank(), 10000);
      if (!hs.ok()) {
        close(fd);
        return hs.WithContext("server " + std::to_string(i) + " (" + addr + ")");
      }
      auto conn = std::make_shared<Connection>(fd, io_loop_.get(), this, "server " + std::to_string(i) + " (" + addr + ")",
                                               SocketTuningOf(config_));
      conn->tag = i;
      conn->Start();
      server_conns_[i].push_back(conn);
    }
  }
  return Status::OK();
}

Status Engine::SubmitMachineReduced(const bps_tensor& input, void* output, const std::string& name,
                                    int32_t priority, int32_t reduce_op, bps_done_fn done, void* user_data) {
  if (!config_.distributed()) return Status::Invalid("SubmitMachineReduced needs servers (more than one machine)");
  return SubmitOp(input, output, name, priority, reduce_op, done, user_data, true);
}

Status Engine::Submit(const bps_tensor& input, void* output, const std::string& name, int32_t priority,
                      int32_t reduce_op, bps_done_fn done, void* user_data) {
  return SubmitOp(input, output, name, priority, reduce_op, done, user_data, false);
}

Status Engine::SubmitOp(const bps_tensor& input, void* output, const std::string& name, int32_t priority,
                        int32_t reduce_op, bps_done_fn done, void* user_data, bool machine_reduced) {
  if (!initialized_) return Status(BPS_NOT_INITIALIZED, "byteps is not initialised: call init() first");
  if (has_fatal_) {
    std::lock_guard<std::mutex> lock(fatal_mu_);
    return fatal_;
  }
  if (!IsValidDataType(input.dtype)) {
    return Status::Invalid("tensor '" + name + "': unsupported dtype code " + std::to_string(input.dtype) +
                           " (supported: float32, float64, float16, bfloat16, int32, int64, uint8)");
  }
  if (input.device >= 0 && !machine_reduced) {
    if (g_device_submit) return g_device_submit(input, output, name, priority, reduce_op, done, user_data);
    return Status::Invalid("tensor '" + name + "' is on CUDA device " + std::to_string(input.device) +
                           " but this engine was built without CUDA (see `python -m byteps_native.info`)");
  }
  if (input.num_elements < 0 || (input.num_elements > 0 && (!input.data || !output))) {
    return Status::Invalid("tensor '" + name + "': null data or negative size");
  }
  if (name.empty()) return Status::Invalid("push_pull needs a non-empty tensor name");
  if (reduce_op != BPS_REDUCE_SUM && reduce_op != BPS_REDUCE_AVERAGE) {
    return Status::Invalid("tensor '" + name + "': unsupported reduce op " + std::to_string(reduce_op) +
                           " (only sum and average)");
  }
  if (!done) return Status::Invalid("push_pull needs a completion callback");
  auto op = std::make_unique<TensorOp>();
  op->name = name;
  op->name_hash = HashName(name);
  op->input = static_cast<const char*>(input.data);
  op->output = static_cast<char*>(output);
  op->dtype = static_cast<DataType>(input.dtype);
  op->count = input.num_elements;
  op->shape = ShapeString(input);
  op->signature = SignatureOf(op->dtype, op->shape);
  op->priority = priority;
  op->average = reduce_op == BPS_REDUCE_AVERAGE;
  op->machine_reduced = machine_reduced;
  op->done = done;
  op->user_data = user_data;
  {
    std::lock_guard<std::mutex> lock(submit_mu_);
    op->seq = next_seq_++;
    submitted_.push_back(std::move(op));
  }
  stats_.queue_depth++;
  Ring();
  return Status::OK();
}

void Engine::Ring() {
  if (shm_) {
    shm_->Ring();
  } else {
    local_doorbell_.fetch_add(1);
    FutexWakeAll(&local_doorbell_);
  }
}

void Engine::Activate(std::unique_ptr<TensorOp> op) {
  const int L = op->machine_reduced ? 1 : config_.local_size;
  const size_t esz = DataTypeSize(op->dtype);
  auto ranges = PlanPartitions(op->count, static_cast<int64_t>(esz), config_.partition_bytes, L, num_servers_);
  TensorOp* raw = op.get();
  for (size_t i = 0; i < ranges.size(); ++i) {
    auto t = std::make_unique<PartitionTask>();
    t->op = raw;
    t->index = static_cast<uint32_t>(i);
    t->range = ranges[i];
    t->local_key = MixKey(raw->name_hash, t->index, 0xffff);
    t->round = next_round_[t->local_key]++;
    t->last_progress = Clock::now();
    raw->parts.push_back(std::move(t));
  }
  raw->remaining = static_cast<int>(raw->parts.size());
  // Every machine sends a tensor's partitions in the same order: partition p
  // then completes on its server as early as possible, so replies flow while
  // later pushes are still going out. Consecutive partitions go to different
  // servers (ServerFor), so a credit window of >= servers partitions keeps
  // every server link busy.
  for (auto& t : raw->parts) active_.push_back(t.get());
  // Highest priority first, then earlier submission, then earlier partition.
  std::stable_sort(active_.begin(), active_.end(), [](const PartitionTask* a, const PartitionTask* b) {
    if (a->op->priority != b->op->priority) return a->op->priority > b->op->priority;
    if (a->op->seq != b->op->seq) return a->op->seq < b->op->seq;
    return a->index < b->index;
  });
  ops_.push_back(std::move(op));
}

void Engine::Loop() {
  while (true) {
    uint32_t seen = shm_ ? shm_->control()->doorbell[config_.local_rank].load() : local_doorbell_.load();
    std::deque<std::unique_ptr<TensorOp>> fresh;
    {
      std::lock_guard<std::mutex> lock(submit_mu_);
      fresh.swap(submitted_);
    }
    for (auto& op : fresh) Activate(std::move(op));
    if (!running_ && active_.empty()) break;

    bool moved = !fresh.empty();
    if (has_fatal_ || !running_) {
      Status st;
      {
        std::lock_guard<std::mutex> lock(fatal_mu_);
        st = has_fatal_ ? fatal_ : Status::Shutdown("byteps shut down while the operation was pending");
      }
      for (auto& op : ops_) FailOp(op.get(), st);
    } else {
      for (PartitionTask* t : active_) {
        if (t->stage != Stage::kDone && !t->op->failed && Advance(*t)) {
          t->last_progress = Clock::now();
          moved = true;
        }
      }
    }
    // Retire finished partitions and operations.
    active_.erase(std::remove_if(active_.begin(), active_.end(),
                                 [](PartitionTask* t) { return t->stage == Stage::kDone || t->op->failed; }),
                  active_.end());
    // The erase above dropped every task of a finished or failed op, so such
    // an op is no longer referenced.
    ops_.erase(std::remove_if(ops_.begin(), ops_.end(),
                              [](const std::unique_ptr<TensorOp>& op) { return op->remaining == 0 || op->failed; }),
               ops_.end());
    CheckTimeoutsAndPeers();
    if (CurrentLogLevel() <= LogLevel::kInfo && Clock::now() - last_stats_log_ > std::chrono::seconds(10)) {
      last_stats_log_ = Clock::now();
      BPS_LOG(Info) << "stats " << StatsJson();
    }
    if (!moved) {
      if (shm_) {
        shm_->WaitDoorbell(config_.local_rank, seen, 50);
      } else if (local_doorbell_.load() == seen) {
        FutexWait(&local_doorbell_, seen, 50);
      }
    }
  }
}

bool Engine::Advance(PartitionTask& t) {
  TensorOp* op = t.op;
  // Ranks that reduce this op through shared memory (1: no local stage).
  const int L = op->machine_reduced ? 1 : config_.local_size;
  const int me = config_.local_rank;
  const size_t esz = DataTypeSize(op->dtype);
  const bool distributed = config_.distributed();
  const int64_t divisor = op->average ? config_.size() : 1;
  const char* in = op->input + t.range.offset * esz;
  char* out = op->output + t.range.offset * esz;
  bool moved = false;

  if (t.stage == Stage::kWaitTurn) {
    // Rounds of one key run in submission order on this rank.
    if (done_round_[t.local_key] != t.round) return false;
    if (L > 1) {
      Status st = shm_->Lookup(t.local_key, t.range.count * esz, static_cast<uint32_t>(op->dtype), &t.entry);
      if (!st.ok()) {
        st = Status(st.code(), "tensor '" + op->name + "' (" + DataTypeName(op->dtype) + " " + op->shape +
                                   " on rank " + std::to_string(rank()) + ") partition " + std::to_string(t.index) +
                                   ": " + st.message() + ": every rank must push the same shape and dtype under one name");
        if (t.entry) {  // make the other local ranks fail too, not time out
          snprintf(t.entry->error, sizeof(t.entry->error), "%s", st.message().c_str());
          t.entry->error_round.store(t.round + 1);
          shm_->Ring();
        }
        FailOp(op, st);
        return true;
      }
    }
    t.stage = Stage::kStage;
    moved = true;
  }

  ShmEntry* e = t.entry;
  auto slot = [&](int q) { return shm_->arena() + e->arena_offset + static_cast<uint64_t>(q) * e->bytes; };

  if (t.stage == Stage::kStage) {
    if (L == 1) {
      t.stage = distributed ? Stage::kPush : Stage::kGather;
    } else {
      if (e->released.load(std::memory_order_acquire) < t.round * static_cast<uint32_t>(L)) return moved;
      uint64_t t0 = NowNs();
      const uint64_t w0 = timeline_.Tracing(t.round) ? Timeline::NowMicros() : 0;
      e->signature[me] = op->signature;
      e->tensor_bytes[me] = static_cast<uint64_t>(op->count) * esz;
      snprintf(e->shape[me], sizeof(e->shape[me]), "%s %s", DataTypeName(op->dtype), op->shape.c_str());
      for (int q = 0; q < L; ++q) {
        if (q == me) continue;  // the owner reads its own slice in place
        Range s = SliceOf(t.range.count, L, q);
        if (s.count > 0) memcpy(slot(me) + s.offset * esz, in + s.offset * esz, s.count * esz);
      }
      stats_.stage_ns += NowNs() - t0;
      if (w0) timeline_.Record(op->name, t.index, t.round, "stage_in", w0, Timeline::NowMicros());
      e->arrived.fetch_add(1, std::memory_order_acq_rel);
      shm_->Ring();
      t.stage = Stage::kReduce;
    }
    moved = true;
  }

  if (t.stage == Stage::kReduce) {
    if (e->error_round.load() == t.round + 1) {
      FailOp(op, Status::Mismatch(std::string(e->error)));
      return true;
    }
    if (e->arrived.load(std::memory_order_acquire) < (t.round + 1) * static_cast<uint32_t>(L)) return moved;
    for (int q = 0; q < L; ++q) {
      if (e->signature[q] != op->signature || e->tensor_bytes[q] != e->tensor_bytes[me]) {
        std::string msg = "tensor '" + op->name + "' has " + e->shape[me] + " on rank " + std::to_string(rank()) +
                          " but " + e->shape[q] + " on rank " + std::to_string(config_.worker_id * L + q) +
                          ": every rank must push the same shape and dtype under one name";
        snprintf(e->error, sizeof(e->error), "%s", msg.c_str());
        e->error_round.store(t.round + 1);
        shm_->Ring();
        FailOp(op, Status::Mismatch(msg));
        return true;
      }
    }
    uint64_t t0 = NowNs();
    const uint64_t w0 = timeline_.Tracing(t.round) ? Timeline::NowMicros() : 0;
    Range s = SliceOf(t.range.count, L, me);
    if (s.count > 0) {
      const void* inputs[kMaxLocalRanks];
      int n = 0;
      inputs[n++] = in + s.offset * esz;
      for (int q = 0; q < L; ++q) {
        if (q != me) inputs[n++] = slot(q) + s.offset * esz;
      }
      ReduceInputs(inputs, n, static_cast<size_t>(s.count), op->dtype, slot(me) + s.offset * esz,
                   distributed ? nullptr : out + s.offset * esz, divisor);
    }
    stats_.local_reduce_ns += NowNs() - t0;
    if (w0) timeline_.Record(op->name, t.index, t.round, "local_reduce", w0, Timeline::NowMicros());
    if (distributed) {
      t.stage = Stage::kPush;
    } else {
      e->ready[me].store(t.round + 1, std::memory_order_release);
      shm_->Ring();
      t.gathered_mask |= 1u << me;
      t.stage = Stage::kGather;
    }
    moved = true;
  }

  if (t.stage == Stage::kPush) {
    Range s = L > 1 ? SliceOf(t.range.count, L, me) : Range{0, t.range.count};
    if (s.count == 0 && t.range.count > 0) {
      // Empty slice: empty on every machine too (same plan), nothing to send.
      if (e) {
        e->ready[me].store(t.round + 1, std::memory_order_release);
        shm_->Ring();
      }
      t.stage = Stage::kGather;
      return true;
    }
    if (credits_.load() <= 0) return moved;  // wait for a queued partition to leave
    credits_--;
    const char* src = e ? slot(me) + s.offset * esz : in;
    char* dst = e ? slot(me) + s.offset * esz : out;
    SendPush(t, src, static_cast<uint64_t>(s.count) * esz, dst);
    t.stage = Stage::kAwait;
    moved = true;
  }

  if (t.stage == Stage::kAwait) {
    int state = t.pull->state.load(std::memory_order_acquire);
    if (state == 0) return moved;
    if (state == 2) {
      FailOp(op, Status::Mismatch("tensor '" + op->name + "' (" + DataTypeName(op->dtype) + " " + op->shape +
                                  " on rank " + std::to_string(rank()) + "): " + t.pull->error));
      return true;
    }
    stats_.bytes_pulled += t.pull->bytes;
    if (t.net_start_us) timeline_.Record(op->name, t.index, t.round, "push_pull", t.net_start_us, Timeline::NowMicros());
    if (e) {
      e->ready[me].store(t.round + 1, std::memory_order_release);
      shm_->Ring();
    }
    t.stage = Stage::kGather;
    moved = true;
  }

  if (t.stage == Stage::kGather) {
    uint64_t t0 = NowNs();
    const uint64_t w0 = timeline_.Tracing(t.round) ? Timeline::NowMicros() : 0;
    if (L == 1) {
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
    if (e->error_round.load() == t.round + 1) {
      FailOp(op, Status::Mismatch(std::string(e->error)));
      return true;
    }
    const uint32_t all = (L >= 32) ? 0xffffffffu : ((1u << L) - 1);
    for (int q = 0; q < L; ++q) {
      if (t.gathered_mask & (1u << q)) continue;
      if (e->ready[q].load(std::memory_order_acquire) < t.round + 1) continue;
      Range s = SliceOf(t.range.count, L, q);
      if (s.count > 0) CopyScaled(out + s.offset * esz, slot(q) + s.offset * esz, s.count, op->dtype, divisor);
      t.gathered_mask |= 1u << q;
      moved = true;
    }
    stats_.gather_ns += NowNs() - t0;
    if (w0 && moved) timeline_.Record(op->name, t.index, t.round, "gather", w0, Timeline::NowMicros());
    if (t.gathered_mask == all) {
      e->released.fetch_add(1, std::memory_order_acq_rel);
      shm_->Ring();
      FinishPartition(t);
      return true;
    }
  }
  return moved;
}

void Engine::SendPush(PartitionTask& t, const char* data, uint64_t bytes, char* dst) {
  TensorOp* op = t.op;
  const int L = config_.local_size;
  const int slice = (L > 1 || op->machine_reduced) ? config_.local_rank : 0;
  t.net_key = MixKey(op->name_hash, t.index, static_cast<uint32_t>(slice));
  t.server = ServerFor(op->name_hash, t.index, slice, L, num_servers_);
  t.pull.reset(new PendingPull());
  t.pull->dst = dst;
  t.pull->bytes = bytes;
  t.pull->round = t.round;
  t.net_start_us = timeline_.Tracing(t.round) ? Timeline::NowMicros() : 0;
  {
    std::lock_guard<std::mutex> lock(net_mu_);
    pending_[t.net_key] = t.pull.get();
  }
  OutMessage m;
  m.header.type = static_cast<uint16_t>(MessageType::kPush);
  m.header.key = t.net_key;
  m.header.name_hash = op->name_hash;
  m.header.round = t.round;
  m.header.partition = t.index;
  m.header.payload_bytes = bytes;
  m.header.sender_rank = static_cast<uint32_t>(rank());
  m.header.dtype = static_cast<uint8_t>(op->dtype);
  m.header.num_contributors = static_cast<uint16_t>(config_.num_worker);
  m.header.signature = op->signature;
  m.header.tensor_bytes = static_cast<uint64_t>(op->count) * DataTypeSize(op->dtype);
  m.payload = data;
  m.on_sent = [this](const Status&) {
    credits_++;
    Ring();
  };
  stats_.bytes_pushed += bytes;
  if (t.server < EngineStats::kMaxTrackedServers) stats_.bytes_per_server[t.server] += bytes;
  auto& conns = server_conns_[t.server];
  conns[t.net_key % conns.size()]->Send(std::move(m));
}

void Engine::FinishPartition(PartitionTask& t) {
  t.stage = Stage::kDone;
  done_round_[t.local_key] = t.round + 1;
  stats_.partitions_completed++;
  TensorOp* op = t.op;
  if (--op->remaining == 0 && !op->failed) {
    stats_.ops_completed++;
    stats_.queue_depth--;
    op->done(op->user_data, BPS_OK, "");
  }
}

void Engine::FailOp(TensorOp* op, const Status& st) {
  if (op->failed || op->remaining == 0) return;
  op->failed = true;
  {
    std::lock_guard<std::mutex> lock(net_mu_);
    for (auto& t : op->parts) {
      if (t->pull && pending_.count(t->net_key) && pending_[t->net_key] == t->pull.get()) pending_.erase(t->net_key);
    }
  }
  stats_.queue_depth--;
  std::string msg = st.message();
  if (msg.find("'" + op->name + "'") == std::string::npos) msg = "push_pull of '" + op->name + "' failed: " + msg;
  op->done(op->user_data, st.code(), msg.c_str());
}

void Engine::SetFatal(const Status& st) {
  {
    std::lock_guard<std::mutex> lock(fatal_mu_);
    if (has_fatal_) return;
    fatal_ = st;
    has_fatal_ = true;
  }
  BPS_LOG(Error) << st.message();
  if (shm_) {
    ShmControl* ctl = shm_->control();
    if (ctl->job_failed.exchange(1) == 0) snprintf(ctl->job_error, sizeof(ctl->job_error), "%s", st.message().c_str());
  }
  Ring();
}

std::string Engine::DescribeWait(const PartitionTask& t) {
  std::string what = "tensor '" + t.op->name + "' partition " + std::to_string(t.index) + " round " +
                     std::to_string(t.round) + " ";
  switch (t.stage) {
    case Stage::kWaitTurn: return what + "waited for its previous round";
    case Stage::kStage: return what + "waited for local ranks to finish the previous round";
    case Stage::kReduce: {
      uint32_t arrived = t.entry ? t.entry->arrived.load() - t.round * config_.local_size : 0;
      return what + "waited for local ranks to submit it (" + std::to_string(arrived) + " of " +
             std::to_string(config_.local_size) + " arrived)";
    }
    case Stage::kPush: return what + "waited for a scheduling credit";
    case Stage::kAwait:
      return what + "waited for server " + std::to_string(t.server) + " (" + server_addresses_[t.server] +
             ") to answer: other machines have not pushed it";
    case Stage::kGather: return what + "waited for other local ranks' slices";
    default: return what;
  }
}

void Engine::CheckTimeoutsAndPeers() {
  auto now = Clock::now();
  if (now - last_peer_check_ < std::chrono::milliseconds(200)) return;
  last_peer_check_ = now;
  if (shm_ && !has_fatal_) {
    ShmControl* ctl = shm_->control();
    if (ctl->job_failed.load()) {
      SetFatal(Status::PeerFailure(std::string("a local rank failed: ") + ctl->job_error));
    } else if (!active_.empty()) {
      for (int q = 0; q < config_.local_size; ++q) {
        int pid = ctl->pids[q];
        if (q != config_.local_rank && pid > 0 && !ProcessAlive(pid)) {
          SetFatal(Status::PeerFailure("local rank " + std::to_string(q) + " (worker rank " +
                                       std::to_string(config_.worker_id * config_.local_size + q) + ", pid " +
                                       std::to_string(pid) + ") died"));
          break;
        }
      }
    }
  }
  for (PartitionTask* t : active_) {
    if (t->stage == Stage::kDone || t->op->failed) continue;
    double idle = std::chrono::duration<double>(now - t->last_progress).count();
    if (idle > config_.timeout_seconds) {
      SetFatal(Status::Timeout("no progress for " + std::to_string(static_cast<int>(idle)) + " s (BYTEPS_TIMEOUT=" +
                               FormatSeconds(config_.timeout_seconds) + "): " + DescribeWait(*t)));
      break;
    }
  }
}

void* Engine::OnHeader(Connection* conn, const MessageHeader& h, Status* reject) {
  if (h.type != static_cast<uint16_t>(MessageType::kResponse)) return nullptr;
  std::lock_guard<std::mutex> lock(net_mu_);
  auto it = pending_.find(h.key);
  if (it == pending_.end() || it->second->round != h.round) {
    // A response for an abandoned (failed) op: read and drop it.
    if (h.payload_bytes > static_cast<uint64_t>(config_.partition_bytes) + 4096) {
      *reject = Status::PeerFailure(conn->peer_name() + " sent an unsolicited response of " +
                                    std::to_string(h.payload_bytes) + " bytes");
      return nullptr;
    }
    if (discard_.size() < h.payload_bytes) discard_.resize(h.payload_bytes);
    return discard_.data();
  }
  if (it->second->bytes != h.payload_bytes) {
    *reject = Status::PeerFailure(conn->peer_name() + " answered " + std::to_string(h.payload_bytes) +
                                  " bytes for a push of " + std::to_string(it->second->bytes));
    return nullptr;
  }
  return it->second->dst;
}

void Engine::OnMessage(Connection* conn, const MessageHeader& h, void* payload) {
  if (h.type == static_cast<uint16_t>(MessageType::kResponse)) {
    std::lock_guard<std::mutex> lock(net_mu_);
    auto it = pending_.find(h.key);
    if (it != pending_.end() && it->second->round == h.round) {
      it->second->state.store(1, std::memory_order_release);
      pending_.erase(it);
    }
  } else if (h.type == static_cast<uint16_t>(MessageType::kError)) {
    std::string msg(static_cast<const char*>(payload), h.payload_bytes);
    if (h.key == 0) {
      SetFatal(Status::PeerFailure(msg + " (reported by " + conn->peer_name() + ")"));
      return;
    }
    std::lock_guard<std::mutex> lock(net_mu_);
    auto it = pending_.find(h.key);
    if (it != pending_.end()) {
      it->second->error = msg;
      it->second->state.store(2, std::memory_order_release);
      pending_.erase(it);
    }
  }
  Ring();
}

void Engine::OnClosed(Connection* conn, const Status& reason) {
  if (shutting_down_) return;
  SetFatal(Status::PeerFailure("lost " + conn->peer_name() + ": " + reason.message()));
}

Status Engine::Shutdown() {
  if (!initialized_) return Status::OK();
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
  for (auto& conns : server_conns_) {
    for (auto& c : conns) {
      OutMessage m;
      if (failed) {
        auto text = std::make_shared<std::string>(why.substr(0, kMaxErrorPayloadBytes));
        m.header.type = static_cast<uint16_t>(MessageType::kError);
        m.header.payload_bytes = text->size();
        m.payload = text->data();
        m.keepalive = text;
      } else {
        m.header.type = static_cast<uint16_t>(MessageType::kBye);
      }
      c->Send(std::move(m));
    }
  }
  Status result;
  if (colocated_server_) {
    // Other machines may still be pushing to our server: serve them out.
    result = colocated_server_->Wait(config_.timeout_seconds);
    colocated_server_->Stop();
    colocated_server_.reset();
  }
  for (auto& conns : server_conns_) {
    for (auto& c : conns) c->Close(Status::Shutdown("shutdown"));
  }
  if (io_loop_) io_loop_->Stop();
  server_conns_.clear();
  io_loop_.reset();
  if (shm_) {
    shm_->control()->pids[config_.local_rank] = 0;
    shm_.reset();
  }
  if (scheduler_client_ && !failed) scheduler_client_->Goodbye();
  if (abort_watch_client_) abort_watch_client_->ShutdownSocket();
  if (abort_watcher_.joinable()) abort_watcher_.join();
  abort_watch_client_.reset();
  scheduler_client_.reset();
  store_.reset();
  {
    std::lock_guard<std::mutex> lock(fatal_mu_);
    fatal_ = Status();
    has_fatal_ = false;
  }
  next_round_.clear();
  done_round_.clear();
  initialized_ = false;
  return result;
}

std::string Engine::StatsJson() {
  std::ostringstream s;
  s << "{\"rank\": " << (initialized_ ? rank() : -1) << ", \"bytes_pushed\": " << stats_.bytes_pushed.load()
    << ", \"bytes_pulled\": " << stats_.bytes_pulled.load() << ", \"ops_completed\": " << stats_.ops_completed.load()
    << ", \"partitions_completed\": " << stats_.partitions_completed.load()
    << ", \"queue_depth\": " << stats_.queue_depth.load()
    << ", \"stage_seconds\": {\"stage_in\": " << stats_.stage_ns.load() * 1e-9
    << ", \"local_reduce\": " << stats_.local_reduce_ns.load() * 1e-9
    << ", \"gather\": " << stats_.gather_ns.load() * 1e-9 << "}"
    << ", \"staging_bytes\": " << (shm_ ? shm_->control()->arena_used.load() : 0)
    << ", \"num_servers\": " << num_servers_ << ", \"bytes_pushed_per_server\": [";
  for (int i = 0; i < std::min(num_servers_, EngineStats::kMaxTrackedServers); ++i) {
    s << (i ? ", " : "") << stats_.bytes_per_server[i].load();
  }
  s << "]";
  if (colocated_server_) s << ", \"colocated_server\": " << colocated_server_->StatsJson();
  s << "}";
  return s.str();
}

Status Engine::RunServer() {
  Config c;
  BPS_RETURN_IF_ERROR(ConfigFromEnvironment(true, &c));
  if (c.role != Role::kServer) return Status::Invalid("bps_run_server needs DMLC_ROLE=server");
  HostPort at{c.root_uri, c.root_port};
  int id = 0;
  // Register anonymously for an id, then connect again as "server <id>", so
  // every failure report (scheduler, workers) names the server by its id.
  // The anonymous registration leaves only once the named connection is
  // open: the scheduler never sees this server with no connection at all.
  std::unique_ptr<TcpStoreClient> registration;
  BPS_RETURN_IF_ERROR(
      TcpStoreClient::Connect(at, c.job_token, Role::kServer, -1, c.rendezvous_timeout_seconds,
                                                c.timeout_seconds, &registration));
  Status claimed = ClaimServerId(registration.get(), c, &id);
  if (!claimed.ok()) {
    registration->Goodbye();
    return claimed;
  }
  std::unique_ptr<TcpStoreClient> client;
  BPS_RETURN_IF_ERROR(TcpStoreClient::Connect(at, c.job_token, Role::kServer, id,
                                              c.rendezvous_timeout_seconds, c.timeout_seconds, &client));
  registration->Goodbye();
  registration.reset();
  SetLogIdentity("server " + std::to_string(id));
  std::shared_ptr<Store> store(client.get(), [](Store*) {});
  Server server(c, store, id, ChooseListenHost(c, client->local_address()));
  // Like workers, a server follows the scheduler's verdict on the job.
  std::unique_ptr<TcpStoreClient> watch;
  std::atomic<bool> done{false};
  std::thread watcher;
  if (TcpStoreClient::Connect(at, c.job_token, Role::kServer, id, 30, c.timeout_seconds, &watch).ok()) {
    watcher = std::thread([&] {
      std::string why;
      while (!done) {
        Status s = watch->Get("abort", 3600, &why);
        if (done) return;
        if (s.ok()) return server.Abort(Status::PeerFailure("job aborted: " + why));
        if (s.code() != BPS_TIMEOUT) return server.Abort(Status::PeerFailure("lost the scheduler: " + s.message()));
      }
    });
  }
  Status st = server.Start();
  if (st.ok()) st = server.Wait(-1);
  done = true;
  server.Stop();
  if (st.ok()) {
    client->Goodbye();
  }
  if (watch) watch->ShutdownSocket();
  if (watcher.joinable()) watcher.join();
  return st;
}

Status Engine::RunServerWithStore(const bps_store& vtable) {
  Config c;
  BPS_RETURN_IF_ERROR(ConfigFromEnvironment(false, &c));
  if (c.role != Role::kServer) return Status::Invalid("bps_run_server_with_store needs DMLC_ROLE=server");
  std::shared_ptr<Store> store = AdapterStore(vtable);
  BPS_RETURN_IF_ERROR(ShareJobSecret(store.get(), &c));
  int id = 0;
  BPS_RETURN_IF_ERROR(ClaimServerId(store.get(), c, &id));
  SetLogIdentity("server " + std::to_string(id));
  Server server(c, store, id, ChooseListenHost(c, ""));
  Status st = server.Start();
  if (st.ok()) st = server.Wait(-1);
  server.Stop();
  return st;
}

Status Engine::RunScheduler() {
  Config c;
  BPS_RETURN_IF_ERROR(ConfigFromEnvironment(true, &c));
  SetLogIdentity("scheduler");
  TcpStoreServer server(c.job_token, c.timeout_seconds);
  server.SetRendezvousTimeout(c.rendezvous_timeout_seconds);
  Status st = server.Listen(c.root_uri, c.root_port);
  if (!st.ok() && st.message().find("Cannot assign requested address") == std::string::npos) return st;
  if (!st.ok()) {
    BPS_LOG(Warning) << st.message() << "; listening on every address instead";
    BPS_RETURN_IF_ERROR(server.Listen("0.0.0.0", c.root_port));
  }
  return server.ServeUntilDone(1);
}

}  // namespace bps
