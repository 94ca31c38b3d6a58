// The one engine of this process, as the C ABI (and through it every adapter)
// and the CUDA path reach it. Init parses the environment once into a Config,
// chooses the rendezvous store (an adapter's, the scheduler's, or an
// in-process one for a one-rank job), watches the scheduler's abort key, and
// builds an Engine from those parts, and beside it the machine's colocated
// server when this rank hosts one; Shutdown undoes it. The Engine itself
// reads no environment and is not a singleton.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

#include "c_api/byteps_c.h"
#include "core/engine.h"
#include "server/server.h"
#include "store/tcp_store.h"

namespace bps {

class ProcessEngine {
 public:
  static ProcessEngine& Get();

  Status Init(const bps_init_options* options);
  Status Shutdown();
  // The running engine, or null before Init / after Shutdown. Callers keep
  // the pointer only for the call: a Shutdown may retire the engine.
  std::shared_ptr<Engine> engine() const { return std::atomic_load(&engine_); }
  // The engine's counters (zeros and rank -1 without one), with the
  // colocated server's under "colocated_server" where this rank runs one.
  std::string StatsJson() const;
  // Every operation this process's engines accepted (join(): c_api.cc).
  const SubmissionLog& submissions() const { return *submissions_; }

 private:
  ProcessEngine() = default;
  Status InitSteps(const bps_init_options* options);
  void StartAbortWatcher(const HostPort& scheduler, const Config& c);
  // Shuts `engine` down, then the colocated server beside it (if any), and
  // returns how the server ended (OK without one).
  Status StopEngineAndServer(Engine& engine);
  // Init failed: tells the scheduler why (it fails the job naming this cause
  // unless it failed already) and returns the cause to report here: the
  // job's earlier verdict, or a lost scheduler, wins over a consequence.
  Status ReportInitFailure(const Status& failure);
  // A worker whose engine failed tells the scheduler its cause before it
  // leaves without goodbye, so the job's verdict names the root, not us.
  void ReportFailureBeforeLeaving(const Status& failure);
  // Stops the scheduler clients; says goodbye to the scheduler unless failed.
  void ReleaseSchedulerClients(bool failed);

  std::mutex mu_;  // serialises Init and Shutdown
  const std::shared_ptr<SubmissionLog> submissions_ = std::make_shared<SubmissionLog>();
  std::shared_ptr<Engine> engine_;
  // Plain torchrun: local rank 0's machine server, started before the
  // engine's rendezvous (the workers look its address up there) and stopped
  // after the engine said goodbye to it.
  std::shared_ptr<Server> colocated_server_;
  std::unique_ptr<TcpStoreClient> scheduler_client_;  // keeps our membership alive
  std::unique_ptr<TcpStoreClient> abort_watch_client_;
  std::thread abort_watcher_;
  std::atomic<bool> stopping_{false};
  // An abort seen while the engine still starts: Init reports it as the
  // cause when Start then fails (a connect to a server the abort took down).
  std::mutex verdict_mu_;
  std::string early_abort_;
};

}  // namespace bps
