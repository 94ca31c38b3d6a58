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

#include "common/status.h"
#include "transport/tcp/event_loop.h"
#include "transport/framing.h"

namespace bps {

struct OutFrame {
  transport::FrameHeader header;
  const void* payload = nullptr;  // header.payload_bytes; valid until on_sent
  std::function<void(const Status&)> on_sent;
  std::shared_ptr<void> keepalive;  // released once written (or failed)
};

class FramedSocket;

// Per-socket settings of data connections (from TransportOptions).
struct SocketTuning {
  // Wake for reading only once this many bytes wait (or the rest of the
  // current message, if less); 0 wakes on every segment.
  size_t receive_low_water = 0;
  // TCP congestion control algorithm; empty keeps the system's default.
  std::string congestion;
  // SO_SNDBUF and SO_RCVBUF; 0 keeps the kernel's autotuning.
  size_t buffer_bytes = 4 << 20;
};


class FramedSocketHandler {
 public:
  virtual ~FramedSocketHandler() = default;
  // A validated header arrived. Return where its payload goes (it must hold
  // header.payload_bytes), nullptr to let the connection buffer it (only
  // allowed for small control payloads), or FramedSocket::DiscardPayload() to
  // read and drop it (OnMessage is then not called). Set *reject to drop the
  // connection.
  virtual void* OnHeader(FramedSocket* conn, const transport::FrameHeader& header, Status* reject) = 0;
  virtual void OnMessage(FramedSocket* conn, const transport::FrameHeader& header, void* payload) = 0;
  virtual void OnClosed(FramedSocket* conn, const Status& reason) = 0;
};

class FramedSocket : public Pollable, public std::enable_shared_from_this<FramedSocket> {
 public:
  // Sends up to this size are written inline by the calling thread (the
  // lowest latency); larger ones by the connection's loop thread.
  static constexpr uint64_t kInlineWriteBytes = 64 << 10;
  // `rules`: the protocol's frames (static), which every header is validated against.
  FramedSocket(int fd, EventLoop* loop, FramedSocketHandler* handler, std::string peer_name,
               const transport::FrameRules* rules, const SocketTuning& tuning = SocketTuning());
  ~FramedSocket() override;
  void Start();
  void Send(OutFrame msg);  // thread-safe; small messages are written inline when possible
  void Close(const Status& reason);  // thread-safe, idempotent
  // Thread-safe. Once `done` runs (on the loop thread), no further byte is
  // written to `dst`: a payload being received into it is read on but
  // dropped, and its OnMessage is not called. Runs `done` even when the
  // connection is closed or nothing is being received into `dst`.
  void CancelReceive(const void* dst, std::function<void()> done);
  // The OnHeader return value that drops a payload (see FramedSocketHandler).
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
  FramedSocketHandler* handler_;
  const transport::FrameRules* rules_;
  std::string peer_name_;
  std::atomic<bool> closed_{false};

  std::mutex send_mu_;
  std::deque<OutFrame> send_queue_;
  size_t front_written_ = 0;  // bytes of the front message already sent
  bool waiting_writable_ = false;

  transport::FrameHeader rx_header_;
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
