// The wire codec: header validation (transport framing, then the
// parameter-server protocol's fields) rejects every malformed field with a
// message naming it, and frames survive a real socket (the TCP transport's
// FramedSocket), split at any byte.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <vector>

#include "ps/protocol.h"
#include "transport/tcp/framed_socket.h"

namespace bps {
namespace {

MessageHeader ValidPush() {
  MessageHeader h;
  h.type = static_cast<uint16_t>(MessageType::kPush);
  h.dtype = static_cast<uint8_t>(DataType::kFloat32);
  h.payload_bytes = 64;
  h.num_contributors = 2;
  return h;
}

TEST(WireHeader, IsSixtyFourBytesLittleEndianMagic) {
  MessageHeader h;
  unsigned char raw[sizeof(h)];
  memcpy(raw, &h, sizeof(h));
  EXPECT_EQ(std::string(reinterpret_cast<char*>(raw), 4), "BPSN");
  EXPECT_EQ(sizeof(MessageHeader), 64u);
}

TEST(WireHeader, AcceptsWellFormedFrames) {
  EXPECT_TRUE(ValidateHeader(ValidPush()).ok());
  MessageHeader bye;
  bye.type = static_cast<uint16_t>(MessageType::kBye);
  EXPECT_TRUE(ValidateHeader(bye).ok());
  MessageHeader err;
  err.type = static_cast<uint16_t>(MessageType::kError);
  err.payload_bytes = 100;
  EXPECT_TRUE(ValidateHeader(err).ok());
}

void ExpectRejected(const MessageHeader& h, const std::string& words) {
  Status st = ValidateHeader(h);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kPeerFailure);
  EXPECT_NE(st.message().find(words), std::string::npos) << st.message();
}

TEST(WireHeader, RejectsEachMalformedField) {
  MessageHeader h = ValidPush();
  h.magic = 0x12345678;
  ExpectRejected(h, "bad magic 0x12345678");
  h = ValidPush();
  h.version = 9;
  ExpectRejected(h, "wire version 9");
  h = ValidPush();
  h.type = 77;
  ExpectRejected(h, "unknown message type 77");
  h = ValidPush();
  h.dtype = 200;
  ExpectRejected(h, "invalid dtype 200");
  h = ValidPush();
  h.payload_bytes = kMaxPayloadBytes + 4;
  ExpectRejected(h, "exceeds the limit");
  h = ValidPush();
  h.payload_bytes = 6;
  ExpectRejected(h, "not a multiple of float32");
  h = ValidPush();
  h.num_contributors = 0;
  ExpectRejected(h, "contributor count");
  h = MessageHeader();
  h.type = static_cast<uint16_t>(MessageType::kError);
  h.payload_bytes = kMaxErrorPayloadBytes + 1;
  ExpectRejected(h, "too long");
  h = MessageHeader();
  h.type = static_cast<uint16_t>(MessageType::kHeartbeat);
  h.payload_bytes = 8;
  ExpectRejected(h, "control message with a payload");
}

// Receives frames into buffers it allocates per header.
class CollectingHandler : public FramedSocketHandler {
 public:
  void* OnHeader(FramedSocket*, const transport::FrameHeader& h, Status*) override {
    std::lock_guard<std::mutex> lock(mu);
    buffers.emplace_back(h.payload_bytes);
    headers.push_back(FromFrame(h));
    return h.type == static_cast<uint16_t>(MessageType::kPush) ? buffers.back().data() : nullptr;
  }
  void OnMessage(FramedSocket*, const transport::FrameHeader& h, void* payload) override {
    std::lock_guard<std::mutex> lock(mu);
    auto& b = buffers.back();
    if (payload != b.data()) memcpy(b.data(), payload, h.payload_bytes);
    ++messages;
    cv.notify_all();
  }
  void OnClosed(FramedSocket*, const Status& reason) override {
    std::lock_guard<std::mutex> lock(mu);
    closed = true;
    close_reason = reason;
    cv.notify_all();
  }
  bool WaitFor(int n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(10), [&] { return messages >= n || closed; }) && messages >= n;
  }
  std::mutex mu;
  std::condition_variable cv;
  std::vector<MessageHeader> headers;
  std::vector<std::vector<char>> buffers;
  int messages = 0;
  bool closed = false;
  Status close_reason;
};

TEST(WireFrames, RoundTripOverASocketPair) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  EventLoop loop("test");
  loop.Start();
  CollectingHandler sink, source_handler;
  auto rx = std::make_shared<FramedSocket>(fds[0], &loop, &sink, "rx", &PsFrameRules());
  auto tx = std::make_shared<FramedSocket>(fds[1], &loop, &source_handler, "tx", &PsFrameRules());
  rx->Start();
  tx->Start();
  std::vector<std::vector<float>> payloads;
  for (int i = 0; i < 20; ++i) payloads.emplace_back(1 + i * 5000, static_cast<float>(i));
  std::atomic<int> sent{0};
  for (int i = 0; i < 20; ++i) {
    MessageHeader h = ValidPush();
    h.key = 1000 + i;
    h.payload_bytes = payloads[i].size() * 4;
    OutFrame m;
    m.header = ToFrame(h);
    m.payload = payloads[i].data();
    m.on_sent = [&](const Status& st) { if (st.ok()) sent++; };
    tx->Send(std::move(m));
  }
  ASSERT_TRUE(sink.WaitFor(20));
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(sink.headers[i].key, 1000u + i);
    ASSERT_EQ(sink.buffers[i].size(), payloads[i].size() * 4);
    EXPECT_EQ(memcmp(sink.buffers[i].data(), payloads[i].data(), payloads[i].size() * 4), 0);
  }
  EXPECT_EQ(sent.load(), 20);
  tx->Close(Status::Shutdown("done"));
  rx->Close(Status::Shutdown("done"));
  loop.Stop();
}

TEST(WireFrames, MalformedHeaderClosesTheConnectionWithTheReason) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  EventLoop loop("test");
  loop.Start();
  CollectingHandler sink;
  auto rx = std::make_shared<FramedSocket>(fds[0], &loop, &sink, "rx", &PsFrameRules());
  rx->Start();
  MessageHeader h = ValidPush();
  h.version = 42;
  ASSERT_EQ(write(fds[1], &h, sizeof(h)), static_cast<ssize_t>(sizeof(h)));
  {
    std::unique_lock<std::mutex> lock(sink.mu);
    ASSERT_TRUE(sink.cv.wait_for(lock, std::chrono::seconds(10), [&] { return sink.closed; }));
    EXPECT_NE(sink.close_reason.message().find("wire version 42"), std::string::npos) << sink.close_reason.message();
  }
  close(fds[1]);
  loop.Stop();
}

}  // namespace
}  // namespace bps
