// libFuzzer harness for what a stranger can send before and after the
// handshake (csrc/transport/tcp/handshake.cc, csrc/store/tcp_store.cc):
//   mode 0: we accept; the input is what the connecting peer sends
//           (AcceptHandshake: hello parsing, version check, HMAC check).
//   mode 1: we connect; the input is what the accepting peer sends
//           (ConnectHandshake: challenge and answer parsing, reject reason).
//   mode 2: an authenticated scheduler client; the input is its stream of
//           store requests (TcpStoreServer::ServeAuthenticated: request
//           header checks, key/value lengths, set/get/add/bye).
// The first input byte chooses the mode; the rest goes on the wire through
// a socketpair, followed by a hang-up.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/logging.h"
#include "store/tcp_store.h"
#include "transport/tcp/handshake.h"
#include "transport/tcp/tcp_transport.h"

namespace {

const std::string kToken = "fuzz-token";

// Store requests (tcp_store.cc): magic u32, op u8, pad[3], key_len u32,
// value_len u32, arg i64. A get waits up to `arg` ms for its key: clamp it
// so an input cannot park the harness (a real client may wait that long).
std::vector<uint8_t> ClampGetWaits(const uint8_t* data, size_t size) {
  std::vector<uint8_t> out(data, data + size);
  size_t at = 0;
  while (at + 24 <= out.size()) {
    uint8_t op = out[at + 4];
    uint32_t key_len, value_len;
    memcpy(&key_len, &out[at + 8], 4);
    memcpy(&value_len, &out[at + 12], 4);
    if (op == 2) {
      int64_t arg;
      memcpy(&arg, &out[at + 16], 8);
      if (arg > 2) arg = arg % 3;
      memcpy(&out[at + 16], &arg, 8);
    }
    uint64_t next = at + 24 + uint64_t(key_len) + value_len;
    if (next > out.size()) break;
    at = static_cast<size_t>(next);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool quiet = [] {
    bps::SetLogLevel(static_cast<bps::LogLevel>(5));
    return true;
  }();
  (void)quiet;
  if (size < 1) return 0;
  const int mode = data[0] % 3;
  std::vector<uint8_t> wire = mode == 2 ? ClampGetWaits(data + 1, size - 1)
                                        : std::vector<uint8_t>(data + 1, data + size);
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return 0;
  int buf = 4 << 20;
  setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
  setsockopt(fds[0], SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
  setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
  // The input fits the socket buffer (libFuzzer's -max_len is far below it).
  size_t off = 0;
  while (off < wire.size()) {
    ssize_t w = send(fds[1], wire.data() + off, wire.size() - off, MSG_NOSIGNAL);
    if (w <= 0) break;
    off += static_cast<size_t>(w);
  }
  shutdown(fds[1], SHUT_WR);
  if (mode == 0) {
    bps::PeerIdentity peer;
    bps::Status st = bps::AcceptHandshake(fds[0], kToken, 1000, &peer);
    // Without the token (the nonce is fresh and random) nobody gets in.
    if (st.ok()) __builtin_trap();
    close(fds[0]);
  } else if (mode == 1) {
    bps::Status st = bps::ConnectHandshake(fds[0], kToken, bps::Role::kWorker, 0, 1000);
    // The acceptor must prove the token over our fresh nonce: no input can.
    if (st.ok()) __builtin_trap();
    close(fds[0]);
  } else {
    bps::TcpStoreServer server(kToken, 5);
    bps::PeerIdentity peer;
    peer.role = bps::Role::kWorker;
    peer.rank = 0;
    peer.address = "fuzz";
    server.ServeAuthenticated(bps::transport::AdoptTcpStream(fds[0]), peer);  // closes fds[0]
  }
  close(fds[1]);
  return 0;
}
