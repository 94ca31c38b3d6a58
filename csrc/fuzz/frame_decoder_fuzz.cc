// libFuzzer harness for the wire frame decoder: arbitrary bytes arrive on a
// real FramedSocket (csrc/transport/tcp/framed_socket.cc) speaking the
// parameter-server protocol's frames (csrc/ps/protocol.h) through a
// socketpair, so header validation (framing, then the protocol's fields:
// ValidateHeader), payload routing, small control-frame
// buffering, truncation and close handling all run exactly as on a server or
// worker. The handler behaves like the server's: it hands out a buffer of
// exactly header.payload_bytes for data frames (AddressSanitizer catches any
// write past it) and lets the connection buffer control frames.
//
// Build and run: csrc/fuzz/build.sh, then see docs/reliability.md.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "common/logging.h"
#include "ps/protocol.h"
#include "transport/tcp/event_loop.h"
#include "transport/tcp/framed_socket.h"

namespace {

// Data frames bigger than this are refused by the harness (a real server
// allocates up to kMaxPayloadBytes; the fuzzer must not).
constexpr uint64_t kHarnessPayloadCap = 1 << 20;

class RecordingHandler : public bps::FramedSocketHandler {
 public:
  void* OnHeader(bps::FramedSocket*, const bps::transport::FrameHeader& frame, bps::Status* reject) override {
    const bps::MessageHeader h = bps::FromFrame(frame);
    // The decoder must only hand us headers that pass validation.
    if (!bps::ValidateHeader(h).ok()) __builtin_trap();
    if (h.type != static_cast<uint16_t>(bps::MessageType::kPush) &&
        h.type != static_cast<uint16_t>(bps::MessageType::kResponse)) {
      return nullptr;  // control frames: the connection buffers them
    }
    if (h.payload_bytes > kHarnessPayloadCap) {
      *reject = bps::Status::PeerFailure("harness: payload too big");
      return nullptr;
    }
    buffers_.emplace_back(new std::vector<char>(h.payload_bytes));
    return buffers_.back()->data();
  }
  void OnMessage(bps::FramedSocket*, const bps::transport::FrameHeader& h, void* payload) override {
    if (closed_) __builtin_trap();  // no message after close
    if (h.payload_bytes > 0 && payload == nullptr) __builtin_trap();
    // Touch every payload byte: ASan flags a buffer shorter than announced.
    const volatile char* p = static_cast<const char*>(payload);
    uint64_t sum = 0;
    for (uint64_t i = 0; i < h.payload_bytes; ++i) sum += p[i];
    checksum_ += sum;
    ++messages_;
  }
  void OnClosed(bps::FramedSocket*, const bps::Status& reason) override {
    if (closed_) __builtin_trap();  // exactly one close
    if (reason.ok()) __builtin_trap();  // a close always says why
    closed_ = true;
  }
  bool closed_ = false;
  int messages_ = 0;
  uint64_t checksum_ = 0;
  std::vector<std::unique_ptr<std::vector<char>>> buffers_;
};

bps::EventLoop* Loop() {
  // Never started: the harness drives OnEvents itself, on this thread.
  static bps::EventLoop* loop = [] {
    bps::SetLogLevel(static_cast<bps::LogLevel>(5));  // silence: every input ends in a close
    return new bps::EventLoop("fuzz");
  }();
  return loop;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return 0;
  int sndbuf = 1 << 20;
  setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
  RecordingHandler handler;
  auto conn = std::make_shared<bps::FramedSocket>(fds[0], Loop(), &handler, "fuzz peer", &bps::PsFrameRules());
  conn->Start();
  // The peer writes the input in small, uneven pieces (bytes 0..1 of the
  // input choose the piece size) so partial headers and payloads are
  // exercised, reading between writes; then it hangs up.
  size_t piece = size >= 1 ? 1 + data[0] % 97 : 1;
  size_t off = 0;
  int idle_rounds = 0;
  while (!handler.closed_) {
    if (off < size) {
      size_t n = std::min(piece, size - off);
      ssize_t w = send(fds[1], data + off, n, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (w > 0) off += static_cast<size_t>(w);
      if (off == size) shutdown(fds[1], SHUT_WR);
    } else if (size == 0 && idle_rounds == 0) {
      shutdown(fds[1], SHUT_WR);
    }
    conn->OnEvents(EPOLLIN);
    if (off == size && ++idle_rounds > 100000) __builtin_trap();  // EOF never noticed: a hang
  }
  close(fds[1]);
  return 0;  // conn's destructor closes fds[0]
}
