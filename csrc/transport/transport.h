// The transport interface: what a job needs from a network (workers, servers
// and the scheduler alike), and nothing about tensors. One folder per
// implementation (tcp/ first; an RDMA sibling registers memory and writes
// one-sided into posted destinations), chosen by name through CreateTransport.
//
// Semantics every implementation keeps (tests/cpp/transport_conformance_test.cc):
//   - every operation completes through exactly one callback carrying a
//     Status; nothing throws;
//   - Send's payload is read until its callback ran, never after;
//   - a posted receive's buffer is written only between PostReceive and its
//     callback; CancelReceive makes the callback run (status kShutdown) and
//     guarantees no byte lands afterwards, even mid-message;
//   - a connection that fails or closes completes every pending callback
//     with the cause;
//   - posted receives are filled by data frames only (FrameKind::kData of
//     the protocol's FrameRules); a text or signal frame, or a data frame
//     that matches no posted receive and no Handlers::destination, goes to
//     the connection's UnexpectedHandler.
// Both sides of a job talk through it: workers connect (csrc/core), servers
// and the scheduler's store accept through a Listener (csrc/server,
// csrc/store). Framing is transport/framing.h; what the frames mean is the
// protocol's (csrc/ps/protocol.h), which the transport is told only through
// Handlers::frames.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/config.h"
#include "common/status.h"
#include "transport/framing.h"

namespace bps {
namespace transport {

using Callback = std::function<void(const Status&)>;

class Connection;

// Who is at the other end of an authenticated connection.
struct PeerIdentity {
  Role role = Role::kWorker;
  int32_t rank = -1;  // worker rank / server id; -1 for anonymous clients
  std::string address;
  std::string Describe() const {  // "worker 3 (10.0.0.2:4567)"
    std::string who = rank >= 0 ? std::string(RoleName(role)) + " " + std::to_string(rank) : std::string(RoleName(role));
    return who + " (" + address + ")";
  }
};

// A message without a posted receive. `payload` holds it when it is small
// (<= kMaxErrorPayloadBytes); larger unexpected payloads are dropped and
// `payload` is empty.
using UnexpectedHandler =
    std::function<void(Connection* conn, const FrameHeader& header, const std::string& payload)>;
// The connection failed or was closed; runs once, after every pending
// callback of the connection ran.
using ClosedHandler = std::function<void(Connection* conn, const Status& reason)>;

// The receiver's choice of where a data frame's payload lands, for data
// that matches no posted receive (a server's pushes arrive unasked, into
// buffers of its own). Runs on the connection's I/O thread, before any byte
// of the payload is read: returns a buffer of header.payload_bytes, or
// nullptr to treat the frame as unexpected; setting *reject closes the
// connection with that cause.
using DestinationChooser = std::function<void*(Connection* conn, const FrameHeader& header, Status* reject)>;
// A payload landed where the DestinationChooser put it (same thread).
using ArrivalHandler = std::function<void(Connection* conn, const FrameHeader& header, void* payload)>;

struct Handlers {
  // Required: the protocol this connection speaks (csrc/ps/protocol.h:
  // &PsFrameRules()); every header is validated against it.
  const FrameRules* frames = nullptr;
  UnexpectedHandler unexpected;
  ClosedHandler closed;
  // Optional, together: data frames into the receiver's own buffers.
  DestinationChooser destination;
  ArrivalHandler arrived;
};

// Who we are and what we share with peers: every connection is authenticated.
struct PeerAuth {
  std::string token;
  Role role = Role::kWorker;
  int32_t rank = -1;
};

// Memory the transport may read from or write into without copies. TCP
// needs nothing; RDMA registers it once (staging pools are long-lived).
struct MemoryRegion {
  void* data = nullptr;
  size_t bytes = 0;
  std::shared_ptr<void> registration;  // the implementation's handle, released with the region
};

class Connection {
 public:
  virtual ~Connection() = default;
  // Sends `header` and header.payload_bytes bytes of `payload`.
  virtual void Send(const FrameHeader& header, const void* payload, Callback done) = 0;
  // Sends without a callback; `owner` keeps `payload` valid until it was
  // written (or the connection failed), then is released.
  virtual void SendOwned(const FrameHeader& header, std::shared_ptr<void> owner, const void* payload) = 0;
  // The payload of the next message carrying (key, round) lands in dst,
  // which holds `bytes`; done(OK) once all of it arrived. A message with a
  // posted key but another size fails the receive (kPeerFailure).
  virtual void PostReceive(uint64_t key, uint32_t round, void* dst, uint64_t bytes, Callback done) = 0;
  // If a receive of `key` is posted: its callback runs with kShutdown, after
  // which nothing is written to its buffer. No-op otherwise.
  virtual void CancelReceive(uint64_t key) = 0;
  virtual void Close(const Status& reason) = 0;  // idempotent
  virtual const std::string& peer_name() const = 0;
  // The I/O thread its callbacks run on, 0 .. Transport::io_threads() - 1:
  // a receiver keeps per-thread state (buffer pools) without locks.
  virtual int io_thread() const = 0;
};

// An authenticated byte stream with blocking calls, for request/reply
// protocols of their own (the scheduler's store, csrc/store). One thread
// reads and writes; Shutdown may come from any thread.
class Stream {
 public:
  virtual ~Stream() = default;
  // All `bytes`, or the cause: Timeout when nothing came for timeout_ms
  // (< 0: no limit), PeerFailure when the peer hung up or the link broke.
  virtual Status Read(void* dst, size_t bytes, int timeout_ms) = 0;
  virtual Status Write(const void* src, size_t bytes, int timeout_ms) = 0;
  // Without blocking: whether the peer hung up (a server waiting on behalf
  // of the peer's request notices that the peer is gone).
  virtual bool PeerHungUp() = 0;
  // Unblocks Read and Write; later calls fail.
  virtual void Shutdown() = 0;
  virtual std::string local_address() const = 0;
};

// How a Listener admits peers in the background: each handshake runs on the
// transport's I/O threads (a stranger holds no thread of the owner), with a
// deadline per connection and a bound on handshakes pending (the oldest
// makes room); refusals are logged at a bounded rate in the owner's name.
struct AcceptOptions {
  std::string owner = "server";  // for log lines: "scheduler", "server 0"
  double deadline_seconds = 10;
  int max_pending = 128;
};

// A peer proved the token: `conn` reads nothing until this returns. Fill
// *handlers (the connection reports to them) and return true, or return
// false to close it. What is sent on `conn` from here goes out once it is
// admitted (or, refused, its callbacks get an error). Runs on an I/O thread.
using AdmitConnection =
    std::function<bool(const std::shared_ptr<Connection>& conn, const PeerIdentity& peer, Handlers* handlers)>;
// A peer proved the token; the stream is the callee's. Runs on an I/O thread:
// blocking work on the stream belongs on a thread of the callee's.
using AdmitStream = std::function<void(std::unique_ptr<Stream> stream, const PeerIdentity& peer)>;

// A listener goes before the transport that made it.
class Listener {
 public:
  virtual ~Listener() = default;  // stops accepting (as StopAccepting)
  virtual std::string address() const = 0;  // "host:port" for peers
  virtual int port() const = 0;
  // Waits up to timeout_seconds for one authenticated peer.
  virtual Status Accept(double timeout_seconds, Handlers handlers, std::shared_ptr<Connection>* out) = 0;
  // Admits peers in the background until StopAccepting, as framed
  // connections or as streams (one or the other per listener).
  virtual Status AcceptConnections(AcceptOptions options, AdmitConnection admit) = 0;
  virtual Status AcceptStreams(AcceptOptions options, AdmitStream admit) = 0;
  // Synchronous: once it returns, no admit callback runs. Idempotent.
  virtual void StopAccepting() = 0;
  // Handshakes accepted and not yet over (thread-safe).
  virtual int pending_handshakes() const = 0;
};

// One per process and implementation: owns the I/O threads.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  // How many I/O threads its connections' callbacks run on (at most).
  virtual int io_threads() const = 0;
  // port 0: an ephemeral one.
  virtual Status Listen(const std::string& host, int port, std::unique_ptr<Listener>* out) = 0;
  // `peer_name` names the peer in every error of the connection ("server 3 (10.0.0.2:1234)").
  virtual Status Connect(const std::string& address, const std::string& peer_name, double timeout_seconds,
                         Handlers handlers, std::shared_ptr<Connection>* out) = 0;
  // A Stream to a listener's AcceptStreams, retrying until timeout_seconds;
  // says every few seconds that it waits for `peer_name` ("the scheduler").
  virtual Status ConnectStream(const std::string& address, const std::string& peer_name, double timeout_seconds,
                               std::unique_ptr<Stream>* out) = 0;
  virtual Status RegisterMemory(void* data, size_t bytes, MemoryRegion* out) = 0;
  // The rank later connections authenticate as: with machines of different
  // sizes a worker's global rank is known only after the rendezvous.
  virtual void SetIdentityRank(int32_t rank) = 0;
};

struct TransportOptions {
  PeerAuth auth;
  double liveness_seconds = 300;  // BYTEPS_TIMEOUT: a silent peer is cut off after this
  size_t receive_low_water = 0;
  std::string congestion;
  size_t socket_buffer_bytes = 4 << 20;  // 0: the kernel's autotuning
  // I/O threads of the process: each new connection gets a thread of its
  // own until there are this many, then they are shared round-robin, so
  // BYTEPS_TCP_CONNECTIONS adds threads, not only sockets. 0: half the
  // cores (at least 1, at most 16).
  int io_threads = 0;
};

// "tcp" (the default). Unknown names are an error listing the known ones.
Status CreateTransport(const std::string& name, const TransportOptions& options, std::unique_ptr<Transport>* out);

}  // namespace transport
}  // namespace bps
