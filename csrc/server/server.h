// Parameter server: receives pushes of partition slices, sums them, and
// answers each contributor as soon as the round of that key is complete
// (sync), or immediately with the running sum (async). Streaming: every
// partition is summed and returned as it completes, not after the tensor.
//
// Workers reach it through a transport (csrc/transport/transport.h): it
// listens, admits authenticated peers in the background, and receives each
// push into a buffer of its own (Handlers::destination).
//
// Scaling with cores: worker connections are spread over up to
// BYTEPS_SERVER_ENGINE_THREAD I/O threads of the transport (one per
// connection until there are that many); each thread receives a push into a
// pooled buffer and sums it on the same core. The push path takes no
// server-wide lock for long: round state is sharded by key (KeyTable), the
// buffer pool's lock covers a free-list lookup (buffer_pool.h), and the
// server-wide mutex guards only connections arriving and leaving.
//
// Round modes: HandlePush reads a push, checks it against its key's round
// (round_mismatch.h) and hands it to the handler of its mode: sync_round,
// half_precision_round, async_round or compressed_round (round_handler.h).
#pragma once
#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "common/config.h"
#include "common/timeline.h"
#include "ps/protocol.h"
#include "server/buffer_pool.h"
#include "server/async_round.h"
#include "server/compressed_round.h"
#include "server/half_precision_round.h"
#include "server/key_table.h"
#include "server/poisoned_tensors.h"
#include "server/round_handler.h"
#include "server/sync_round.h"
#include "store/store.h"
#include "transport/transport.h"

namespace bps {

class Server final : private RoundServices {
 public:
  static constexpr int kFailureGraceSeconds = 2;
  // Partitions' worth of buffers the pool warms at start (within BYTEPS_SERVER_BUFFER_POOL).
  static constexpr int kWarmPartitions = 8;
  // `transport`: what workers reach this server through; null: "tcp" with
  // TransportOptionsFor(config).
  Server(Config config, std::shared_ptr<Store> store, int server_id, std::string listen_host,
         std::unique_ptr<transport::Transport> transport = nullptr);
  ~Server() override;
  // A server's transport settings from its Config: the job's token, liveness
  // (BYTEPS_TIMEOUT), socket tuning and BYTEPS_SERVER_ENGINE_THREAD I/O threads.
  static transport::TransportOptions TransportOptionsFor(const Config& config, int server_id);
  Status Start();  // listen, then announce "server/<id>" in the store
  // Blocks until every worker rank of the job came and all of its
  // connections left (orderly: OK; any died: PeerFailure naming it) or
  // `timeout_seconds` passes (< 0: none). After a failure (with a timeout)
  // it waits at most kFailureGraceSeconds more for the connections to leave.
  // `job_ranks` > 0: the job's size is known (a colocated server's engine
  // knows it), so the store is not asked -- a stopped store host (torch's
  // TCPStore client waits on it without bound) must not hold the shutdown.
  Status Wait(double timeout_seconds, int job_ranks = 0);
  void Stop();
  // The job failed elsewhere (scheduler abort): tell connected workers, end Wait().
  void Abort(const Status& why);
  std::string address() const { return listener_ ? listener_->address() : ""; }
  std::string StatsJson();
  BufferPoolStats buffer_stats() { return buffers_->Stats(); }

 private:
  using Connection = transport::Connection;
  using PeerIdentity = transport::PeerIdentity;
  class WorkerLink;

  // An authenticated worker connection, before it reads (on an I/O thread).
  bool AdmitConnection(const std::shared_ptr<Connection>& conn, const PeerIdentity& peer,
                       transport::Handlers* handlers);
  // On the connection's I/O thread, once its payload is in `payload`.
  void AcknowledgeReceipt(Connection& conn, const MessageHeader& push);
  void HandlePush(const std::shared_ptr<Connection>& conn, const MessageHeader& h,
                  std::shared_ptr<AlignedBuffer> payload);
  RoundHandler& HandlerOf(const Push& push);
  // RoundServices, for the round handlers.
  int server_id() const override { return server_id_; }
  bool TakeBuffer(size_t bytes, const Push& push, std::shared_ptr<AlignedBuffer>* out) override;
  void Answer(const std::shared_ptr<Connection>& to, const MessageHeader& answer,
              const std::shared_ptr<AlignedBuffer>& wire) override;
  void FailTensor(const MessageHeader& h, const std::string& why) override;
  Timeline& timeline() override { return timeline_; }
  // `text`: the frame's payload, escaped by the transport.
  void OnControl(Connection* conn, const MessageHeader& h, const std::string& text);
  void OnLinkClosed(Connection* conn, const Status& reason);
  void SendError(const std::shared_ptr<Connection>& conn, uint64_t key, uint64_t name_hash, const std::string& msg);
  // The abort's cause; the caller has counted it in abort_frames_pending_.
  void SendAbortFrame(const std::shared_ptr<Connection>& conn, const std::string& why);
  // A tensor-scoped error (name_hash) to every worker connection but `except`.
  void TellEveryone(uint64_t key, uint64_t name_hash, const std::string& msg, Connection* except);

  Config config_;
  std::shared_ptr<Store> store_;
  int server_id_;
  std::string listen_host_;
  std::atomic<bool> stopping_{false};
  // The transport's I/O threads carry the connections (at most
  // config_.server_engine_threads); the listener's handshakes run on the
  // first. The listener goes first: no admission calls into this server
  // after it; then the transport: no push is being handled after it.
  std::unique_ptr<transport::Transport> transport_;
  std::unique_ptr<transport::Listener> listener_;
  // Every buffer of the push path: pushes land in them, sums and answers
  // live in them (BYTEPS_SERVER_BUFFER_POOL bounds what waits free).
  std::shared_ptr<BufferPool> buffers_;

  KeyTable keys_;
  PoisonedTensors poisoned_;
  SyncRound sync_round_{this};
  HalfPrecisionRound half_precision_round_{this};
  AsyncRound async_round_{this};
  CompressedRound compressed_round_{this};

  // Connections arriving and leaving; never taken on the push path.
  std::mutex mu_;
  std::condition_variable cv_;
  struct Peer {
    std::shared_ptr<Connection> conn;
    PeerIdentity identity;
  };
  std::map<Connection*, Peer> conns_;
  std::set<Connection*> said_bye_;
  std::set<Connection*> reported_;  // workers that sent their failure
  std::set<int> ranks_seen_;        // worker ranks that ever connected
  bool aborted_ = false;
  int abort_frames_pending_ = 0;  // under mu_: Abort's error frames not yet written
  Status failure_;

  std::atomic<uint64_t> bytes_in_{0}, bytes_out_{0}, pushes_{0};
  Timeline timeline_;
};

}  // namespace bps
