// A whole job in one process: M machines x L local ranks of Engine, each
// built from a Config (no environment), and S Servers, all rendezvousing
// through one MemoryStore and talking over loopback TCP with the real
// handshake. Local ranks of one machine share real POSIX shared memory.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "core/engine.h"
#include "server/server.h"
#include "store/memory_store.h"
#include "transport/transport.h"

namespace bps {
namespace testing_support {

struct JobShape {
  int machines = 1;
  int local_size = 1;
  int servers = 0;
  int64_t partition_bytes = 4096;  // small: a test tensor spans many partitions
  double timeout_seconds = 20;
  int key_table_size = 8192;  // BYTEPS_LOCAL_KEY_TABLE_SIZE
  // Machines of different sizes (issue 29): machine m runs local_sizes[m]
  // ranks; when set, `machines` and `local_size` are ignored.
  std::vector<int> local_sizes;
  std::string transport = "tcp";  // workers and servers (test_matrix.h)
  std::string reducer = "shm";    // the host reducer's name (test_matrix.h)
  HostReducerFactory host_reducer = nullptr;  // null: the EngineOptions' own
  int scheduling_credit = 0;  // BYTEPS_SCHEDULING_CREDIT, in partitions (0: the Config's default)
  bool gpu_stream_ordered = false;  // BYTEPS_GPU_STREAM_ORDERED
  int64_t device_copy_ahead_bytes = -1;  // BYTEPS_DEVICE_COPY_AHEAD_BYTES (-1: the Config's default)

  int machine_count() const { return local_sizes.empty() ? machines : static_cast<int>(local_sizes.size()); }
  int local_size_of(int m) const { return local_sizes.empty() ? local_size : local_sizes[m]; }
};

// A layout's test name: "2machines_x2local", "uneven_2_1local".
inline std::string LayoutName(const ::testing::TestParamInfo<JobShape>& info) {
  if (!info.param.local_sizes.empty()) {
    std::string name = "uneven";
    for (int l : info.param.local_sizes) name += "_" + std::to_string(l);
    return name + "local";
  }
  return std::to_string(info.param.machines) + "machines_x" + std::to_string(info.param.local_size) + "local";
}

// A case of a suite over the test matrix (test_matrix.h):
// "2machines_x1local_1servers_tcp_shm".
inline std::string MatrixCaseName(const ::testing::TestParamInfo<JobShape>& info) {
  const JobShape& s = info.param;
  return LayoutName(info) + "_" + std::to_string(s.servers) + "servers_" + s.transport + "_" + s.reducer;
}

inline void PrintTo(const JobShape& s, std::ostream* os) {
  if (s.local_sizes.empty()) {
    *os << s.machines << " machines x " << s.local_size << " local ranks, " << s.servers << " servers";
    *os << " (" << s.transport << ", " << s.reducer << ")";
    return;
  }
  *os << "machines of";
  for (int l : s.local_sizes) *os << " " << l;
  *os << " local ranks, " << s.servers << " servers";
  *os << " (" << s.transport << ", " << s.reducer << ")";
}

// One push_pull's completion, waited for by the test.
struct Completion {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  StatusCode code = StatusCode::kOk;
  std::string message;

  static void Callback(void* user_data, int32_t code, const char* message) {
    auto* c = static_cast<Completion*>(user_data);
    std::lock_guard<std::mutex> lock(c->mu);
    c->code = static_cast<StatusCode>(code);
    c->message = message ? message : "";
    c->done = true;
    c->cv.notify_all();
  }
  bool Wait(double seconds) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return done; });
  }
};

class InProcessJob {
 public:
  static constexpr const char* kToken = "in-process-job-token";

  // `options`: how every engine is wired (its device reducer, say).
  explicit InProcessJob(const JobShape& shape, EngineOptions options = EngineOptions())
      : shape_(shape), options_(options), store_(std::make_shared<MemoryStore>()) {
    static std::atomic<int> jobs{0};
    job_id_ = "ipj" + std::to_string(getpid()) + "x" + std::to_string(jobs++);
  }
  ~InProcessJob() { Stop(); }

  int size() const {
    int total = 0;
    for (int m = 0; m < shape_.machine_count(); ++m) total += shape_.local_size_of(m);
    return total;
  }
  Engine& rank(int r) { return *engines_[r]; }
  const JobShape& shape() const { return shape_; }

  Config WorkerConfig(int rank) const {
    Config c = BaseConfig();
    c.role = Role::kWorker;
    int m = 0, first = 0;
    while (rank >= first + shape_.local_size_of(m)) first += shape_.local_size_of(m++);
    c.worker_id = m;
    c.local_size = shape_.local_size_of(m);
    c.local_rank = rank - first;
    return c;
  }

  // Starts the servers, then every rank's engine at once (their rendezvous
  // waits for all of them).
  Status Start() {
    for (int s = 0; s < shape_.servers; ++s) {
      Config c = BaseConfig();
      c.role = Role::kServer;
      std::unique_ptr<transport::Transport> transport;
      BPS_RETURN_IF_ERROR(transport::CreateTransport(shape_.transport, Server::TransportOptionsFor(c, s), &transport));
      servers_.emplace_back(new Server(c, store_, s, "127.0.0.1", std::move(transport)));
      BPS_RETURN_IF_ERROR(servers_.back()->Start());
    }
    for (int r = 0; r < size(); ++r) {
      Config c = WorkerConfig(r);
      transport::TransportOptions options;
      options.auth = transport::PeerAuth{c.job_token, Role::kWorker, r};
      options.liveness_seconds = c.timeout_seconds;
      std::unique_ptr<transport::Transport> transport;
      BPS_RETURN_IF_ERROR(transport::CreateTransport(shape_.transport, options, &transport));
      EngineOptions engine_options = options_;
      if (shape_.host_reducer) engine_options.host_reducer = shape_.host_reducer;
      engines_.emplace_back(new Engine(c, store_, std::move(transport), engine_options));
    }
    std::vector<Status> results(size());
    std::vector<std::thread> starters;
    for (int r = 0; r < size(); ++r) starters.emplace_back([&, r] { results[r] = engines_[r]->Start(); });
    for (auto& t : starters) t.join();
    for (int r = 0; r < size(); ++r) {
      if (!results[r].ok()) return results[r].WithContext("starting rank " + std::to_string(r));
    }
    return Status::OK();
  }

  void Stop() {
    for (auto& e : engines_) e->Shutdown();
    engines_.clear();
    for (auto& s : servers_) s->Stop();
    servers_.clear();
  }

 private:
  Config BaseConfig() const {
    Config c;
    c.num_worker = shape_.machine_count();
    c.local_size = shape_.local_size_of(0);
    c.num_server = shape_.servers;
    c.force_distributed = shape_.servers > 0 && shape_.machine_count() == 1;
    c.partition_bytes = shape_.partition_bytes;
    c.server_engine_threads = 1;
    c.timeout_seconds = shape_.timeout_seconds;
    c.rendezvous_timeout_seconds = 20;
    c.job_token = kToken;
    c.job_id = job_id_;
    c.local_key_table_size = shape_.key_table_size;
    if (shape_.scheduling_credit) c.scheduling_credit = shape_.scheduling_credit;
    c.gpu_stream_ordered = shape_.gpu_stream_ordered;
    if (shape_.device_copy_ahead_bytes >= 0) c.device_copy_ahead_bytes = shape_.device_copy_ahead_bytes;
    // Small next to the default (128 MiB a rank): these jobs' tensors come
    // both from the warm pool and past it, without backing 128 MiB per test.
    c.local_staging_reserve_bytes = 1 << 20;
    return c;
  }

  JobShape shape_;
  EngineOptions options_;
  std::string job_id_;
  std::shared_ptr<MemoryStore> store_;
  std::vector<std::unique_ptr<Server>> servers_;
  std::vector<std::unique_ptr<Engine>> engines_;
};

}  // namespace testing_support
}  // namespace bps
