// The transport interface: what the engine needs from a network, and nothing
// about tensors. One folder per implementation (tcp/ first; an RDMA sibling
// registers memory and writes one-sided into posted destinations), chosen by
// name through CreateTransport.
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
//   - posted receives are filled by data frames (push, response) only; a
//     control frame (error, bye) or a data frame that matches no posted
//     receive goes to the connection's UnexpectedHandler.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/config.h"
#include "common/status.h"
#include "transport/wire.h"

namespace bps {
namespace transport {

using Callback = std::function<void(const Status&)>;

class Connection;
// A message without a posted receive. `payload` holds it when it is small
// (<= kMaxErrorPayloadBytes); larger unexpected payloads are dropped and
// `payload` is empty.
using UnexpectedHandler =
    std::function<void(Connection* conn, const MessageHeader& header, const std::string& payload)>;
// The connection failed or was closed; runs once, after every pending
// callback of the connection ran.
using ClosedHandler = std::function<void(Connection* conn, const Status& reason)>;

struct Handlers {
  UnexpectedHandler unexpected;
  ClosedHandler closed;
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
  virtual void Send(const MessageHeader& header, const void* payload, Callback done) = 0;
  // The payload of the next message carrying (key, round) lands in dst,
  // which holds `bytes`; done(OK) once all of it arrived. A message with a
  // posted key but another size fails the receive (kPeerFailure).
  virtual void PostReceive(uint64_t key, uint32_t round, void* dst, uint64_t bytes, Callback done) = 0;
  // If a receive of `key` is posted: its callback runs with kShutdown, after
  // which nothing is written to its buffer. No-op otherwise.
  virtual void CancelReceive(uint64_t key) = 0;
  virtual void Close(const Status& reason) = 0;  // idempotent
  virtual const std::string& peer_name() const = 0;
};

class Listener {
 public:
  virtual ~Listener() = default;
  virtual std::string address() const = 0;  // "host:port" for peers
  // Waits up to timeout_seconds for one authenticated peer.
  virtual Status Accept(double timeout_seconds, Handlers handlers, std::shared_ptr<Connection>* out) = 0;
};

// One per process and implementation: owns the I/O threads.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  virtual Status Listen(const std::string& host, std::unique_ptr<Listener>* out) = 0;
  // `peer_name` names the peer in every error of the connection ("server 3 (10.0.0.2:1234)").
  virtual Status Connect(const std::string& address, const std::string& peer_name, double timeout_seconds,
                         Handlers handlers, std::shared_ptr<Connection>* out) = 0;
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
