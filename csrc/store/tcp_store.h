// The scheduler's rendezvous service: a MemoryStore served over a
// transport's authenticated streams (transport/transport.h: Listener::
// AcceptStreams, Transport::ConnectStream; TCP today), plus its client. The server also watches its
// clients: one that disconnects without saying goodbye aborts the job, which
// every other client learns through the key "abort" (see Engine).
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <string>
#include <thread>
#include <vector>

#include "common/net_util.h"
#include "store/memory_store.h"
#include "transport/transport.h"

namespace bps {

// The key every job member watches for the scheduler's verdict. Watchers ask
// for it with Gets of at most AbortWatchIntervalSeconds, so the scheduler
// hears from each live member well within half of BYTEPS_TIMEOUT.
constexpr const char* kAbortKey = "abort";
inline double AbortWatchIntervalSeconds(double timeout_seconds) {
  return std::max(0.2, std::min(timeout_seconds / 8, 30.0));
}

class TcpStoreServer {
 public:
  TcpStoreServer(std::string token, double timeout_seconds);
  ~TcpStoreServer();
  Status Listen(const std::string& host, int port);
  // Serves until every client that ever connected has said goodbye (or died)
  // and at least `expected_clients` connected. Returns the first failure seen.
  Status ServeUntilDone(int expected_clients);
  int port() const { return port_; }
  // Fail the job (every member learns it through "abort") when the workers
  // have not all arrived this long after the scheduler started listening:
  // without it a scheduler whose workers died before rendezvous ran forever.
  void SetRendezvousTimeout(double seconds) { rendezvous_timeout_seconds_ = seconds; }
  // The scheduler's own DMLC_NUM_WORKER: the first job size a worker
  // publishes must match it (it was ignored: a scheduler expecting 3 machines
  // ran a job of 2 without a word). 0: no check.
  void ExpectWorkerMachines(int machines) { expected_machines_ = machines; }
  MemoryStore& store() { return store_; }
  // Serves the requests of one stream that already passed the handshake,
  // until it says goodbye or breaks, on the calling thread. Public for the
  // fuzz harness (csrc/fuzz/handshake_store_fuzz.cc).
  void ServeAuthenticated(std::unique_ptr<transport::Stream> stream, const transport::PeerIdentity& peer);

 private:
  using PeerIdentity = transport::PeerIdentity;
  struct ClientThread {
    std::thread thread;
    std::atomic<bool> done{false};
  };
  void AdmitClient(std::unique_ptr<transport::Stream> stream, const PeerIdentity& peer);
  // The request loop of an authenticated, counted stream.
  void ServeRequests(transport::Stream* stream, const PeerIdentity& peer);
  void ReapFinishedThreads();
  // The scheduler's own checks of what clients publish (all ranks must agree).
  void CheckPublished(const std::string& key, const std::string& value, const PeerIdentity& peer);
  // Empty, or why the first published job size contradicts the scheduler's
  // DMLC_NUM_WORKER. Called with mu_ held.
  std::string MismatchWithSchedulerCount(const std::string& size, const PeerIdentity& peer);
  void FailJob(const std::string& why);
  bool RendezvousComplete();
  // Who came, for the rendezvous verdict: "2 of 3 workers arrived at the
  // scheduler (missing: rank 2)", counted by machine before the ranks are known.
  std::string WorkersArrived();
  Status FirstFailure();
  // A scheduler waiting for its workers says so every kWaitNoteSeconds.
  void NoteWaitingForWorkers(std::chrono::steady_clock::time_point started);
  std::string token_;
  double timeout_seconds_;
  MemoryStore store_;
  int port_ = 0;
  // Handshakes run on the transport's I/O thread (no thread per stranger);
  // an authenticated client gets a thread for its blocking requests.
  std::unique_ptr<transport::Transport> transport_;
  std::unique_ptr<transport::Listener> listener_;
  std::mutex mu_;
  std::condition_variable cv_;
  // One per accepted connection; joined as soon as it ends, so strangers
  // that knock and are refused do not pile up finished threads.
  std::list<std::unique_ptr<ClientThread>> threads_;
  std::set<transport::Stream*> open_streams_;
  std::set<std::pair<int, int>> goodbyes_;  // (role, rank) that left in order
  int connected_ = 0;     // passed the handshake
  int finished_ = 0;
  Status first_failure_;
  std::chrono::steady_clock::time_point failed_at_;  // when first_failure_ was set
  double rendezvous_timeout_seconds_ = -1;  // < 0: none
  std::string job_size_, job_size_from_;   // the first "size" published, and by whom
  std::string job_machines_, job_machines_from_;  // the first DMLC_NUM_WORKER a worker published
  int expected_machines_ = 0;
  // BYTEPS_LOCAL_SIZE each worker connection published (in "worker/<rank>",
  // just before its "size"), to say which DMLC_NUM_WORKER a size implies.
  std::map<std::string, int> local_size_by_peer_;
};

class TcpStoreClient : public Store {
 public:
  // Connects (retrying for connect_timeout_seconds) and authenticates;
  // role/rank identify us in the scheduler's logs. The connection carries
  // heartbeats that break it within about 2/3 of liveness_seconds
  // (BYTEPS_TIMEOUT) when the scheduler vanishes.
  static Status Connect(const HostPort& at, const std::string& token, Role role, int rank,
                        double connect_timeout_seconds, double liveness_seconds,
                        std::unique_ptr<TcpStoreClient>* out);
  ~TcpStoreClient() override;
  Status Set(const std::string& key, const std::string& value) override;
  Status Get(const std::string& key, double timeout_seconds, std::string* value) override;
  Status Add(const std::string& key, int64_t delta, int64_t* result) override;
  // An abort watcher's wait: OK with the verdict once the job is aborted,
  // Timeout when `interval_seconds` passed without one, PeerFailure when the
  // scheduler is lost -- or silent for half of BYTEPS_TIMEOUT past the
  // interval (stopped: a SIGSTOPped scheduler's kernel still answers TCP).
  Status WatchAbort(double interval_seconds, std::string* why);
  // This member failed (`why`): the scheduler fails the job naming it, unless
  // it already failed; `verdict` is the job's verdict in force (this one or
  // the earlier). Bounded (2 s) for a scheduler that stopped.
  Status ReportFailure(const std::string& why, std::string* verdict);
  // Orderly goodbye: the scheduler will not treat our disconnect as a death.
  void Goodbye();
  std::string local_address() const;
  void ShutdownSocket();  // unblocks a thread waiting in Get

 private:
  TcpStoreClient(std::unique_ptr<transport::Transport> transport, std::unique_ptr<transport::Stream> stream,
                 HostPort at, std::string token, double liveness_seconds)
      : transport_(std::move(transport)), stream_(std::move(stream)), at_(std::move(at)), token_(std::move(token)),
        liveness_seconds_(liveness_seconds) {}
  Status Call(uint8_t op, const std::string& key, const std::string& value, int64_t arg, std::string* reply,
              int64_t* reply_arg, int timeout_ms);
  std::unique_ptr<transport::Transport> transport_;
  std::unique_ptr<transport::Stream> stream_;
  HostPort at_;
  std::string token_;  // keys this job's verdict (common/job_verdict.h)
  double liveness_seconds_;  // BYTEPS_TIMEOUT
  std::mutex mu_;
};

}  // namespace bps
