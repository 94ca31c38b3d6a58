// Connection handshake: version check plus HMAC-SHA256 challenge-response
// over the per-job secret, on every connection (store and data), in both
// directions: the acceptor proves the secret over the connector's nonce too.
// A peer without the secret, or of another version, is refused with a message.
#pragma once
#include <cstdint>
#include <string>

#include "common/config.h"
#include "common/status.h"
#include "transport/framing.h"
#include "transport/transport.h"

namespace bps {

using transport::PeerIdentity;

#pragma pack(push, 1)
struct HandshakeFrame {
  uint32_t magic = kWireMagic;
  uint16_t version = kWireVersion;
  uint16_t type = 0;
  uint16_t role = 0;
  uint16_t reserved = 0;
  int32_t rank = -1;
  uint8_t nonce_or_mac[32] = {0};
  char reason[80] = {0};
};
#pragma pack(pop)

// The acceptor's steps, shared by the blocking AcceptHandshake and the
// event-loop HandshakeAcceptor: a fresh challenge, then the verdict on the
// connector's hello (the answer to send back either way; *peer on success).
void MakeChallenge(HandshakeFrame* challenge);
Status JudgeHello(const std::string& token, const HandshakeFrame& challenge, const HandshakeFrame& hello,
                  HandshakeFrame* answer, PeerIdentity* peer);

// Server side of an accepted, blocking socket. Fills *peer on success.
Status AcceptHandshake(int fd, const std::string& token, int timeout_ms, PeerIdentity* peer);
// Client side of a connected, blocking socket.
Status ConnectHandshake(int fd, const std::string& token, Role role, int32_t rank, int timeout_ms);

}  // namespace bps
