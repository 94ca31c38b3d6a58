#include "c_api/process_engine.h"

#include <string>

#include "c_api/c_store.h"
#include "common/config.h"
#include "common/logging.h"
#include "common/terminate_report.h"
#include "core/rendezvous.h"
#include "local/shared_memory.h"
#include "store/job_secret.h"
#include "store/memory_store.h"
#include "transport/transport.h"

namespace bps {
namespace {

// The adapter's view of the job (torchrun's ranks) overrides the environment.
Status ApplyInitOptions(const bps_init_options* options, Config* c) {
  if (!options) return Status::OK();
  if (options->local_size > 0) c->local_size = options->local_size;
  if (options->local_rank >= 0) c->local_rank = options->local_rank;
  // Machines may run different numbers of ranks (issue 29): torchrun names
  // the machine (GROUP_RANK of GROUP_WORLD_SIZE); without it, ranks are
  // numbered machine by machine with equal machines. The rendezvous then
  // derives the global rank from the machines' sizes, and Init checks it.
  const char* group_rank = getenv("GROUP_RANK");
  const char* group_size = getenv("GROUP_WORLD_SIZE");
  if (options->size > 0 && group_rank && group_size && *group_rank && *group_size) {
    c->worker_id = atoi(group_rank);
    c->num_worker = atoi(group_size);
    return Status::OK();
  }
  if (options->size > 0) {
    if (options->size % c->local_size != 0) {
      return Status::Invalid("world size " + std::to_string(options->size) + " is not a multiple of local size " +
                             std::to_string(c->local_size) +
                             ": with machines of different sizes, set GROUP_RANK and GROUP_WORLD_SIZE "
                             "(torchrun does) to this machine's index and the machine count");
    }
    c->num_worker = options->size / c->local_size;
  }
  if (options->rank >= 0) {
    if (options->rank % c->local_size != c->local_rank) {
      return Status::Invalid("rank " + std::to_string(options->rank) + " is not local rank " +
                             std::to_string(c->local_rank) + " of a machine with " + std::to_string(c->local_size) +
                             " ranks: ranks must be numbered machine by machine");
    }
    c->worker_id = options->rank / c->local_size;
  }
  return Status::OK();
}

}  // namespace

ProcessEngine& ProcessEngine::Get() {
  static ProcessEngine* process = new ProcessEngine();  // never destroyed: threads may outlive statics
  return *process;
}

Status ProcessEngine::Init(const bps_init_options* options) {
  InstallTerminateReport();
  std::lock_guard<std::mutex> lock(mu_);
  if (engine_) return Status::OK();
  Status st = InitSteps(options);
  if (!st.ok()) {
    st = ReportInitFailure(st);
    ReleaseSchedulerClients(/*failed=*/true);
  }
  return st;
}

Status ProcessEngine::ReportInitFailure(const Status& failure) {
  const std::string& mine = failure.message();
  if (!scheduler_client_ || mine.find("job aborted: ") != std::string::npos) return failure;  // the verdict already
  // Our cause, not our disconnect, becomes the job's verdict: every rank that
  // gave up waiting for a server killed at start-up names the server, and so
  // must the scheduler and everyone it tells (issue 30).
  std::string verdict;
  Status reported = scheduler_client_->ReportFailure(mine, &verdict);
  if (!reported.ok()) {
    // The scheduler is gone, the likelier root: a local rank 1 whose local
    // rank 0 left on it finds the shared memory unlinked ("shm_open: No such
    // file or directory"), which names nothing.
    if (mine.find("scheduler") != std::string::npos) return failure;
    return Status::PeerFailure(reported.message() + " (then: " + mine + ")");
  }
  const std::string printable = Printable(mine);
  const bool ours = verdict.size() >= printable.size() &&
                    verdict.compare(verdict.size() - printable.size(), printable.size(), printable) == 0;
  if (ours) return failure;
  // The job had failed already: that is the cause, ours a consequence.
  return Status::PeerFailure("job aborted: " + verdict + " (then: " + mine + ")");
}

Status ProcessEngine::InitSteps(const bps_init_options* options) {
  stopping_ = false;
  {
    std::lock_guard<std::mutex> lock(verdict_mu_);
    early_abort_.clear();
  }
  Config c;
  BPS_RETURN_IF_ERROR(ConfigFromEnvironment(false, &c));
  if (c.role != Role::kWorker) {
    return Status::Invalid(std::string("init() called in a process with DMLC_ROLE=") + RoleName(c.role) +
                           ": servers and schedulers run bps_run_server / bps_run_scheduler");
  }
  BPS_RETURN_IF_ERROR(ApplyInitOptions(options, &c));
  if (c.local_size > kMaxLocalRanks) {
    return Status::Invalid("local size " + std::to_string(c.local_size) + " exceeds the supported " +
                           std::to_string(kMaxLocalRanks));
  }
  if (c.worker_id >= c.num_worker) {
    return Status::Invalid("machine index " + std::to_string(c.worker_id) + " must be < " + std::to_string(c.num_worker));
  }

  const bool have_store = options && options->store;
  std::shared_ptr<Store> store;
  EngineOptions engine_options;
  engine_options.submissions = submissions_;
  engine_options.trace = TraceSettingsFromEnvironment();
  std::string route_to_scheduler;  // this host's address as the scheduler sees it
  if (have_store) {
    store = AdapterStore(std::make_shared<CStore>(*options->store));
    BPS_RETURN_IF_ERROR(ShareJobSecret(store.get(), &c));
    engine_options.colocated_servers = c.num_server == 0;  // plain torchrun: one server per machine
  } else if (c.size() == 1 && !c.force_distributed) {
    store = std::make_shared<MemoryStore>();
  } else {
    if (c.root_uri.empty() || c.root_port == 0) {
      return Status::Invalid(
          "this job has " + std::to_string(c.size()) +
          " ranks but no rendezvous: set DMLC_PS_ROOT_URI and DMLC_PS_ROOT_PORT (the scheduler), launch with "
          "bpslaunch, or use torch.distributed.init_process_group('byteps')");
    }
    HostPort at{c.root_uri, c.root_port};
    BPS_RETURN_IF_ERROR(TcpStoreClient::Connect(at, c.job_token, Role::kWorker, c.rank(), c.rendezvous_timeout_seconds,
                                                c.timeout_seconds, &scheduler_client_));
    route_to_scheduler = scheduler_client_->local_address();
    store = std::shared_ptr<Store>(scheduler_client_.get(), [](Store*) {});
    StartAbortWatcher(at, c);
  }

  const bool hosts_colocated_server = engine_options.colocated_servers && c.distributed() && c.local_rank == 0;

  std::unique_ptr<transport::Transport> transport;
  transport::TransportOptions transport_options;
  transport_options.auth = transport::PeerAuth{c.job_token, Role::kWorker, c.rank()};
  transport_options.liveness_seconds = c.timeout_seconds;
  transport_options.receive_low_water = static_cast<size_t>(c.tcp_receive_low_water);
  transport_options.congestion = c.tcp_congestion;
  transport_options.socket_buffer_bytes = static_cast<size_t>(c.tcp_socket_buffer);
  BPS_RETURN_IF_ERROR(transport::CreateTransport("tcp", transport_options, &transport));

  std::shared_ptr<Server> colocated_server;
  if (hosts_colocated_server) {
    SetLogIdentity("worker " + std::to_string(c.rank()));  // as the engine names this process
    colocated_server = std::make_shared<Server>(c, store, c.worker_id, ChooseListenHost(c, route_to_scheduler));
    Status serving = colocated_server->Start();
    if (!serving.ok()) {
      colocated_server->Stop();
      return serving;
    }
    std::atomic_store(&colocated_server_, colocated_server);
  }
  auto engine = std::make_shared<Engine>(c, store, std::move(transport), engine_options);
  Status started = engine->Start();
  if (!started.ok()) {
    if (colocated_server) {
      std::atomic_store(&colocated_server_, std::shared_ptr<Server>());
      colocated_server->Stop();
    }
    std::lock_guard<std::mutex> lock(verdict_mu_);
    if (!early_abort_.empty() && started.message().find(early_abort_) == std::string::npos) {
      return Status::PeerFailure(early_abort_ + " (then: " + started.message() + ")");
    }
    return started;
  }
  // Machines of different sizes: the rendezvous numbered the ranks machine by
  // machine; the adapter's ranks (torchrun's) must agree, or sums would mix.
  if (options && ((options->rank >= 0 && options->rank != engine->rank()) ||
                  (options->size > 0 && options->size != engine->size()))) {
    const std::string why = "the launcher says rank " + std::to_string(options->rank) + " of " +
                            std::to_string(options->size) + " but the machines' local sizes make it rank " +
                            std::to_string(engine->rank()) + " of " + std::to_string(engine->size()) +
                            ": number ranks machine by machine (GROUP_RANK order)";
    StopEngineAndServer(*engine);
    return Status::Invalid(why);
  }
  std::atomic_store(&engine_, engine);
  return Status::OK();
}

void ProcessEngine::StartAbortWatcher(const HostPort& scheduler, const Config& c) {
  Status st = TcpStoreClient::Connect(scheduler, c.job_token, Role::kWorker, c.rank(), 30, c.timeout_seconds,
                                      &abort_watch_client_);
  if (!st.ok()) return;
  const double interval = AbortWatchIntervalSeconds(c.timeout_seconds);
  const std::string where = c.root_uri + ":" + std::to_string(c.root_port);
  abort_watcher_ = std::thread([this, interval, where] {
    std::string why;
    while (true) {
      Status s = abort_watch_client_->WatchAbort(interval, &why);
      if (stopping_) return;
      if (s.code() == StatusCode::kTimeout) continue;
      Status verdict = s.ok() ? Status::PeerFailure("job aborted: " + why)
                              : Status::PeerFailure("lost the scheduler " + where + ": " + s.message());
      // The engine may still be starting (rendezvous): wait for it, or for
      // Init to give up (stopping_) naming this verdict.
      {
        std::lock_guard<std::mutex> lock(verdict_mu_);
        early_abort_ = verdict.message();
      }
      while (!stopping_) {
        if (std::shared_ptr<Engine> engine = std::atomic_load(&engine_)) {
          engine->Fail(verdict);
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      return;
    }
  });
}

void ProcessEngine::ReleaseSchedulerClients(bool failed) {
  stopping_ = true;
  if (scheduler_client_ && !failed) scheduler_client_->Goodbye();
  if (abort_watch_client_) abort_watch_client_->ShutdownSocket();
  if (abort_watcher_.joinable()) abort_watcher_.join();
  abort_watch_client_.reset();
  scheduler_client_.reset();
}

Status ProcessEngine::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<Engine> engine = std::atomic_load(&engine_);
  if (!engine) return Status::OK();
  stopping_ = true;  // the abort watcher's wake-up below is no verdict
  Status st = StopEngineAndServer(*engine);
  const bool failed = engine->failed();
  std::atomic_store(&engine_, std::shared_ptr<Engine>());
  if (failed) ReportFailureBeforeLeaving(engine->failure());
  ReleaseSchedulerClients(failed);
  return st;
}

Status ProcessEngine::StopEngineAndServer(Engine& engine) {
  Status st = engine.Shutdown();
  std::shared_ptr<Server> server = std::atomic_exchange(&colocated_server_, std::shared_ptr<Server>());
  if (!server) return st;
  if (engine.failed()) {
    // The job is over: serving the other machines out would only wait for
    // them to notice (a stopped one never does). The server tells its
    // workers this rank's cause and its Wait returns at once (issue 30).
    server->Abort(engine.failure());
  }
  // Otherwise other machines may still be pushing to our server: serve them
  // out. (A rank whose op failed through its machine may not be failed itself.)
  Status served = server->Wait(engine.config().timeout_seconds, engine.size());
  server->Stop();
  return served;
}

std::string ProcessEngine::StatsJson() const {
  std::shared_ptr<Engine> engine = std::atomic_load(&engine_);
  // Without a running engine: the same fields, all zero, rank -1.
  std::string json = engine ? engine->StatsJson() : Engine(Config(), nullptr, nullptr).StatsJson();
  std::shared_ptr<Server> server = std::atomic_load(&colocated_server_);
  if (engine && server) {
    // One more field of the engine's object: before its closing brace.
    json.insert(json.size() - 1, ", \"colocated_server\": " + server->StatsJson());
  }
  return json;
}

void ProcessEngine::ReportFailureBeforeLeaving(const Status& failure) {
  // Without this the scheduler fails the job naming our disconnect, and a
  // rank that learns the failure from it names no root (issue 30: a server
  // killed in training was named by three workers; the fourth said `job
  // aborted: worker 2 (...) disconnected from the scheduler`, the first that
  // failed on it and left). A verdict already in force, or a lost scheduler,
  // has nothing to add (and a stopped scheduler would hold us 2 s).
  const std::string& mine = failure.message();
  if (!scheduler_client_ || mine.find("job aborted: ") != std::string::npos ||
      mine.find("scheduler") != std::string::npos) {
    return;
  }
  scheduler_client_->ReportFailure(mine, nullptr);
}

}  // namespace bps
