// Connection handshake: version check plus HMAC-SHA256 challenge-response
// over the per-job secret, on every connection (store and data), in both
// directions: the acceptor proves the secret over the connector's nonce too.
// A peer without the secret, or of another version, is refused with a message.
#pragma once
#include <cstdint>
#include <string>

#include "common/config.h"
#include "common/status.h"

namespace bps {

struct PeerIdentity {
  Role role = Role::kWorker;
  int32_t rank = -1;  // worker rank / server id; -1 for anonymous clients
  std::string address;
  std::string Describe() const;  // "worker 3 (10.0.0.2:4567)"
};

// Server side of an accepted, blocking socket. Fills *peer on success.
Status AcceptHandshake(int fd, const std::string& token, int timeout_ms, PeerIdentity* peer);
// Client side of a connected, blocking socket.
Status ConnectHandshake(int fd, const std::string& token, Role role, int32_t rank, int timeout_ms);

}  // namespace bps
