// The worker's side of the parameter servers: one or more connections per
// server, pushes whose answers land straight in a buffer of the caller's,
// error frames routed to the pull they concern, tensor errors relayed to
// every machine, and the goodbye (or the failure's cause) at shutdown.
//
// Threads: Push and the relays run on the engine thread; answers, error
// frames and lost connections arrive on the transport's I/O thread, which
// only flips a pull's state, queues a tensor error or reports a failure, then
// rings the engine.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/config.h"
#include "common/dtype.h"
#include "common/status.h"
#include "store/store.h"
#include "ps/protocol.h"
#include "transport/transport.h"

namespace bps {

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
  StatusCode error_code = StatusCode::kMismatch;  // with `error`: a mismatch, a deadline, a cancel
  transport::Connection* conn = nullptr;  // where the receive is posted
  std::shared_ptr<PartitionIo> io;
  std::atomic<bool> released{false};
  // Gives the push's scheduling credit back, once: when the server says the
  // push arrived (kReceived), or when the receive ends without that.
  // Returns whether the engine must be woken (a partition waits for credit).
  std::function<bool()> on_received;
  std::atomic<bool> received{false};
  bool Received() { return !received.exchange(true) && on_received && on_received(); }
  // Counts this pull out of io->in_flight exactly once (its receive's
  // callback); true when that left the partition nothing in flight.
  bool Release() {
    return !released.exchange(true) && io->in_flight.fetch_sub(1, std::memory_order_acq_rel) == 1;
  }
  // The op failed: its buffer is given up (the callback then releases it).
  void Cancel(uint64_t key) {
    if (!released.load()) conn->CancelReceive(key);
  }
};

// One partition's slice pushed to its server, the sum expected back.
struct PushRequest {
  int server = 0;
  uint64_t key = 0;            // (name, partition, slice): the same on every machine
  uint64_t name_hash = 0;
  uint32_t round = 0;
  uint32_t partition = 0;
  DataType dtype = DataType::kFloat32;
  bool average = false;
  bool compressed = false;     // data and answer are codec payloads (csrc/compression)
  uint64_t signature = 0;      // dtype, shape, operation: the machines must agree
  uint64_t tensor_bytes = 0;
  int64_t partition_bytes = 0; // the size its tensor was cut at (Config::PartitionBytesFor)
  const char* data = nullptr;  // read until the push is written
  uint64_t bytes = 0;
  char* dst = nullptr;         // the answer's destination
  uint64_t answer_bytes = 0;   // 0: `bytes` (a compressed answer may differ: AnswerCodec)
  std::shared_ptr<PartitionIo> io;
};

// A tensor's failure told by a server: every op of that name (this
// generation) from `first_op` on fails with `why`.
struct TensorError {
  uint64_t name_hash = 0;
  uint32_t first_op = 0;
  StatusCode code = StatusCode::kMismatch;  // a server's own finding: a mismatch
  std::string why;
};

class ServerClient {
 public:
  struct Callbacks {
    std::function<void()> ring;                  // wake the engine thread
    std::function<void(const Status&)> fail;     // the job failed (a lost server, an abort)
  };
  ServerClient(const Config& config, std::shared_ptr<Store> store, std::unique_ptr<transport::Transport> transport,
               Callbacks callbacks);
  ~ServerClient();

  // Waits (BYTEPS_RENDEZVOUS_TIMEOUT) for each server's address in the
  // store and connects BYTEPS_CONNECTIONS_PER_SERVER times to it.
  Status Connect(int num_servers);
  int num_servers() const { return static_cast<int>(conns_.size()); }
  const std::string& address(int server) const { return addresses_[server]; }

  // Posts the receive of the answer, then sends the push. `on_received`
  // runs once on a transport thread when the server has the whole push (its
  // kReceived), or when the receive ends first (answer, cancel, failure:
  // the receive's callback always runs). The scheduling credits come back
  // there, not when the push was written into a socket: bytes in a socket
  // buffer are still queued for the link, and counting them as gone let
  // every partition of a step into the sockets at once, where they shared
  // the link, finished together and left the download idle until then
  // (issue 38). Not with the answer either: that waits for the other
  // machines' pushes, which may wait for credits this machine holds.
  std::shared_ptr<PendingPull> Push(const PushRequest& r, std::function<bool()> on_received);
  // Tells the other machines, through every server, that op `name_op` of a
  // tensor failed here (a mismatch, a deadline, a cancel: `failure`), so
  // they fail with its code and text instead of timing out.
  void RelayTensorError(uint64_t name_hash, uint32_t name_op, const Status& failure);
  // Tensor errors the servers reported since the last call.
  std::vector<TensorError> TakeTensorErrors();
  // Every server hears goodbye, or, after a failure, its cause (which the
  // servers relay to every other worker).
  void SayGoodbye(const Status& failure);
  // Connections closed from here on are not failures (shutdown).
  void Quiesce() { quiescing_ = true; }
  // Closes every connection and stops the transport's I/O thread.
  void Close();

 private:
  Status WaitForServer(int server, int num_servers, std::string* addr);
  void OnUnexpected(transport::Connection* conn, const MessageHeader& header, const std::string& payload);
  void OnClosed(transport::Connection* conn, const Status& reason);

  const Config& config_;
  std::shared_ptr<Store> store_;
  std::unique_ptr<transport::Transport> transport_;
  Callbacks callbacks_;
  std::vector<std::vector<std::shared_ptr<transport::Connection>>> conns_;
  std::vector<std::string> addresses_;
  std::atomic<bool> quiescing_{false};
  std::mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<PendingPull>> pending_;  // by key: routes error frames
  std::vector<TensorError> tensor_errors_;
};

}  // namespace bps
