// A framed, non-blocking TCP connection: scatter/gather writes of
// header+payload straight from the caller's buffer, and reads of each payload
// straight into the destination the handler chooses. Memory per connection is
// bounded: nothing is buffered except small error messages.
#pragma once
#include <sys/uio.h>

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "transport/tcp/event_loop.h"
#include "transport/wire.h"

namespace bps {

struct OutMessage {
  MessageHeader header;
  const void* payload = nullptr;  // header.payload_bytes; valid until on_sent
  std::function<void(const Status&)> on_sent;
  std::shared_ptr<void> keepalive;  // released once written (or failed)
};

class Connection;

// Per-socket settings of data connections (from Config).
struct SocketTuning {
  // Wake for reading only once this many bytes wait (or the rest of the
  // current message, if less); 0 wakes on every segment.
  size_t receive_low_water = 0;
  // TCP congestion control algorithm; empty keeps the system's default.
  std::string congestion;
};

inline SocketTuning SocketTuningOf(const Config& config) {
  return SocketTuning{static_cast<size_t>(config.tcp_receive_low_water), config.tcp_congestion};
}

class ConnectionHandler {
 public:
  virtual ~ConnectionHandler() = default;
  // A validated header arrived. Return where its payload goes (it must hold
  // header.payload_bytes), nullptr to let the connection buffer it (only
  // allowed for small control payloads), or Connection::DiscardPayload() to
  // read and drop it (OnMessage is then not called). Set *reject to drop the
  // connection.
  virtual void* OnHeader(Connection* conn, const MessageHeader& header, Status* reject) = 0;
  virtual void OnMessage(Connection* conn, const MessageHeader& header, void* payload) = 0;
  virtual void OnClosed(Connection* conn, const Status& reason) = 0;
};

class Connection : public Pollable, public std::enable_shared_from_this<Connection> {
 public:
  // Sends up to this size are written inline by the calling thread (the
  // lowest latency); larger ones by the connection's loop thread.
  static constexpr uint64_t kInlineWriteBytes = 64 << 10;
  Connection(int fd, EventLoop* loop, ConnectionHandler* handler, std::string peer_name,
             const SocketTuning& tuning = SocketTuning());
  ~Connection() override;
  void Start();
  void Send(OutMessage msg);  // thread-safe; small messages are written inline when possible
  void Close(const Status& reason);  // thread-safe, idempotent
  // Thread-safe. Once `done` runs (on the loop thread), no further byte is
  // written to `dst`: a payload being received into it is read on but
  // dropped, and its OnMessage is not called. Runs `done` even when the
  // connection is closed or nothing is being received into `dst`.
  void CancelReceive(const void* dst, std::function<void()> done);
  // The OnHeader return value that drops a payload (see ConnectionHandler).
  static void* DiscardPayload();
  const std::string& peer_name() const { return peer_name_; }
  bool closed() const { return closed_; }
  void OnEvents(uint32_t events) override;
  // Opaque slot for the owner (e.g. the peer's rank).
  int tag = -1;

 private:
  void ReadAvailable();
  void ArmReceiveLowWater();
  // Caller holds send_mu_. Returns completed callbacks to run unlocked.
  Status FlushLocked(std::vector<std::function<void()>>* done);
  void CloseOnLoop(const Status& reason);

  int fd_;
  EventLoop* loop_;
  ConnectionHandler* handler_;
  std::string peer_name_;
  std::atomic<bool> closed_{false};

  std::mutex send_mu_;
  std::deque<OutMessage> send_queue_;
  size_t front_written_ = 0;  // bytes of the front message already sent
  bool waiting_writable_ = false;

  MessageHeader rx_header_;
  size_t rx_header_got_ = 0;
  bool rx_in_payload_ = false;
  char* rx_dst_ = nullptr;
  size_t rx_payload_got_ = 0;
  std::vector<char> rx_small_;  // only for small control payloads
  bool rx_discarding_ = false;  // the current payload is read into rx_scratch_ and dropped
  std::vector<char> rx_scratch_;
  size_t receive_low_water_;
  int armed_low_water_ = 1;  // the socket's SO_RCVLOWAT (Linux default 1)
};

}  // namespace bps
