#include "transport/tcp/handshake.h"

#include <cstring>

#include "common/logging.h"
#include "common/net_util.h"
#include "common/sha256.h"
#include "transport/framing.h"

namespace bps {
namespace {

constexpr uint16_t kChallenge = 100, kHello = 101, kAccept = 102, kReject = 103;

Digest256 ProofOf(const std::string& token, const uint8_t* nonce, uint16_t role, int32_t rank) {
  uint8_t msg[32 + 2 + 4];
  memcpy(msg, nonce, 32);
  memcpy(msg + 32, &role, 2);
  memcpy(msg + 34, &rank, 4);
  return HmacSha256("byteps-native-v1:" + token, msg, sizeof(msg));
}

// The acceptor's proof, over both nonces: the connector learns that it
// reached a member of its own job, not whoever listens on that port now.
// The connector's fresh nonce makes a recorded accept useless for replay.
constexpr size_t kConnectorNonceBytes = 32;  // carried in hello.reason
Digest256 AcceptorProofOf(const std::string& token, const uint8_t* acceptor_nonce, const char* connector_nonce,
                          uint16_t role, int32_t rank) {
  uint8_t msg[8 + 32 + kConnectorNonceBytes + 2 + 4];
  memcpy(msg, "acceptor", 8);
  memcpy(msg + 8, acceptor_nonce, 32);
  memcpy(msg + 40, connector_nonce, kConnectorNonceBytes);
  memcpy(msg + 72, &role, 2);
  memcpy(msg + 74, &rank, 4);
  return HmacSha256("byteps-native-v1:" + token, msg, sizeof(msg));
}

Status CheckFrame(const HandshakeFrame& f) {
  if (f.magic != kWireMagic) return Status::PeerFailure("peer is not a byteps-native process (bad magic)");
  if (f.version != kWireVersion) {
    return Status::PeerFailure("peer speaks wire version " + std::to_string(f.version) + ", this build speaks " +
                               std::to_string(kWireVersion) + ": run the same byteps-native version everywhere");
  }
  return Status::OK();
}

}  // namespace

void MakeChallenge(HandshakeFrame* challenge) {
  *challenge = HandshakeFrame();
  challenge->type = kChallenge;
  SecureRandom(challenge->nonce_or_mac, 32);
}

Status JudgeHello(const std::string& token, const HandshakeFrame& challenge, const HandshakeFrame& hello,
                  HandshakeFrame* answer, PeerIdentity* peer) {
  *answer = HandshakeFrame();
  Status st = CheckFrame(hello);
  if (st.ok() && (hello.type != kHello || hello.role > 2)) st = Status::PeerFailure("malformed hello");
  if (st.ok()) {
    Digest256 expected = ProofOf(token, challenge.nonce_or_mac, hello.role, hello.rank);
    Digest256 got;
    memcpy(got.data(), hello.nonce_or_mac, 32);
    if (!DigestEqual(expected, got)) {
      st = Status::PeerFailure("authentication failed: the peer does not hold this job's BYTEPS_JOB_TOKEN");
    }
  }
  answer->type = st.ok() ? kAccept : kReject;
  if (st.ok()) {
    Digest256 ours = AcceptorProofOf(token, challenge.nonce_or_mac, hello.reason, hello.role, hello.rank);
    memcpy(answer->nonce_or_mac, ours.data(), 32);
    peer->role = static_cast<Role>(hello.role);
    peer->rank = hello.rank;
  } else {
    snprintf(answer->reason, sizeof(answer->reason), "%s", st.message().c_str());
  }
  return st;
}

Status AcceptHandshake(int fd, const std::string& token, int timeout_ms, PeerIdentity* peer) {
  peer->address = PeerAddressOf(fd);
  HandshakeFrame challenge;
  MakeChallenge(&challenge);
  BPS_RETURN_IF_ERROR(WriteFully(fd, &challenge, sizeof(challenge), timeout_ms));
  HandshakeFrame hello;
  Status st = ReadFully(fd, &hello, sizeof(hello), timeout_ms);
  if (!st.ok()) return st.WithContext("handshake with " + peer->address);
  HandshakeFrame answer;
  st = JudgeHello(token, challenge, hello, &answer, peer);
  WriteFully(fd, &answer, sizeof(answer), timeout_ms);  // best effort on reject
  if (!st.ok()) {
    BPS_LOG(Warning) << "rejected connection from " << peer->address << ": " << st.message();
  }
  return st;
}

Status ConnectHandshake(int fd, const std::string& token, Role role, int32_t rank, int timeout_ms) {
  HandshakeFrame challenge;
  BPS_RETURN_IF_ERROR(ReadFully(fd, &challenge, sizeof(challenge), timeout_ms));
  BPS_RETURN_IF_ERROR(CheckFrame(challenge));
  if (challenge.type != kChallenge) return Status::PeerFailure("malformed handshake challenge");
  HandshakeFrame hello;
  hello.type = kHello;
  hello.role = static_cast<uint16_t>(role);
  hello.rank = rank;
  Digest256 proof = ProofOf(token, challenge.nonce_or_mac, hello.role, rank);
  memcpy(hello.nonce_or_mac, proof.data(), 32);
  SecureRandom(hello.reason, kConnectorNonceBytes);
  BPS_RETURN_IF_ERROR(WriteFully(fd, &hello, sizeof(hello), timeout_ms));
  HandshakeFrame answer;
  BPS_RETURN_IF_ERROR(ReadFully(fd, &answer, sizeof(answer), timeout_ms));
  BPS_RETURN_IF_ERROR(CheckFrame(answer));
  if (answer.type != kAccept) {
    answer.reason[sizeof(answer.reason) - 1] = '\0';
    return Status::PeerFailure("connection refused by peer: " + Printable(answer.reason));
  }
  Digest256 expected = AcceptorProofOf(token, challenge.nonce_or_mac, hello.reason, hello.role, rank);
  Digest256 got;
  memcpy(got.data(), answer.nonce_or_mac, 32);
  if (!DigestEqual(expected, got)) {
    return Status::PeerFailure("authentication failed: the peer at " + PeerAddressOf(fd) +
                               " accepted the connection but does not hold this job's BYTEPS_JOB_TOKEN "
                               "(another job, or not byteps-native, listens there)");
  }
  return Status::OK();
}

}  // namespace bps
