// Parameter server: receives pushes of partition slices, sums them with
// BYTEPS_SERVER_ENGINE_THREAD threads (keys pinned to threads by load), and
// answers each contributor as soon as the round of that key is complete
// (sync), or immediately with the running sum (async). Streaming: every
// partition is summed and returned as it completes, not after the tensor.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/config.h"
#include "core/timeline.h"
#include "store/store.h"
#include "transport/handshake.h"
#include "transport/handshake_acceptor.h"
#include "transport/tcp/connection.h"

namespace bps {

struct AlignedBuffer {
  explicit AlignedBuffer(size_t n);
  ~AlignedBuffer();
  char* data = nullptr;
  size_t size = 0;
};

class Server : public ConnectionHandler {
 public:
  Server(Config config, std::shared_ptr<Store> store, int server_id, std::string listen_host);
  ~Server() override;
  Status Start();  // listen, then announce "server/<id>" in the store
  // Blocks until every worker connection that came has left (orderly: OK;
  // any died: PeerFailure naming it) or `timeout_seconds` passes (< 0: none).
  Status Wait(double timeout_seconds);
  void Stop();
  // The job failed elsewhere (scheduler abort): tell connected workers, end Wait().
  void Abort(const Status& why);
  std::string address() const { return listen_host_ + ":" + std::to_string(port_); }
  std::string StatsJson();

  void* OnHeader(Connection* conn, const MessageHeader& header, Status* reject) override;
  void OnMessage(Connection* conn, const MessageHeader& header, void* payload) override;
  void OnClosed(Connection* conn, const Status& reason) override;

 private:
  struct PushWork {
    std::shared_ptr<Connection> conn;
    MessageHeader header;
    std::shared_ptr<AlignedBuffer> payload;
  };
  struct KeyState {
    DataType dtype = DataType::kFloat32;
    uint64_t payload_bytes = 0;
    uint32_t round = 0;
    uint64_t signature = 0;
    uint64_t tensor_bytes = 0;
    uint32_t first_rank = 0;
    int contributions = 0;
    std::shared_ptr<AlignedBuffer> acc;       // float32 for 16-bit types
    std::shared_ptr<AlignedBuffer> wire[2];   // response buffers, by round parity
    std::vector<std::pair<std::shared_ptr<Connection>, MessageHeader>> waiting;
  };
  struct EngineThread {
    std::thread thread;
    std::mutex mu;
    std::condition_variable cv;
    std::deque<PushWork> queue;
    std::unordered_map<uint64_t, KeyState> keys;
    uint64_t assigned_bytes = 0;
  };

  void AdmitConnection(int fd, const PeerIdentity& peer);
  void EngineMain(EngineThread* t);
  void HandlePush(EngineThread* t, PushWork& w);
  void SendError(const std::shared_ptr<Connection>& conn, uint64_t key, uint64_t name_hash, const std::string& msg);
  // A tensor-scoped error (name_hash) to every worker connection but `except`.
  void TellEveryone(uint64_t key, uint64_t name_hash, const std::string& msg, Connection* except);
  std::shared_ptr<AlignedBuffer> TakeBuffer(size_t bytes);
  void ReturnBuffer(std::shared_ptr<AlignedBuffer> b);
  std::shared_ptr<Connection> Find(Connection* raw);

  Config config_;
  std::shared_ptr<Store> store_;
  int server_id_;
  std::string listen_host_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::unique_ptr<EventLoop> loop_;
  // Handshakes run in loop_; stopped before anything they call into goes.
  std::unique_ptr<HandshakeAcceptor> acceptor_;
  std::vector<std::unique_ptr<EngineThread>> engines_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<Connection*, std::shared_ptr<Connection>> conns_;
  std::map<Connection*, PeerIdentity> peers_;
  std::set<Connection*> said_bye_;
  std::set<Connection*> reported_;  // workers that sent their failure
  int ever_connected_ = 0;
  bool aborted_ = false;
  Status failure_;
  std::unordered_map<uint64_t, int> key_thread_;
  std::unordered_map<uint64_t, std::string> poisoned_;  // name_hash -> first error
  std::map<Connection*, std::shared_ptr<AlignedBuffer>> inflight_;  // payload being received

  std::mutex pool_mu_;
  std::multimap<size_t, std::shared_ptr<AlignedBuffer>> pool_;
  std::atomic<uint64_t> bytes_in_{0}, bytes_out_{0}, pushes_{0};
  Timeline timeline_;
};

}  // namespace bps
