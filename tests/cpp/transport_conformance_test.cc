// The transport conformance suite: the semantics of transport/transport.h,
// written once and instantiated for every implementation (tcp today; an RDMA
// sibling adds its name to the instantiation below).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "transport/transport.h"
#include "completion.h"

namespace bps {
namespace transport {
namespace {

constexpr char kToken[] = "conformance-token";

MessageHeader DataHeader(uint64_t key, uint32_t round, uint64_t bytes) {
  MessageHeader h;
  h.type = static_cast<uint16_t>(MessageType::kResponse);
  h.key = key;
  h.round = round;
  h.dtype = static_cast<uint8_t>(DataType::kFloat32);
  h.payload_bytes = bytes;
  return h;
}

class TransportConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    TransportOptions options;
    options.auth.token = kToken;
    options.liveness_seconds = 30;
    ASSERT_TRUE(CreateTransport(GetParam(), options, &transport_).ok());
    std::unique_ptr<Listener> listener;
    ASSERT_TRUE(transport_->Listen("127.0.0.1", &listener).ok());
    Handlers receiver;
    receiver.unexpected = [this](Connection*, const MessageHeader& h, const std::string& payload) {
      std::lock_guard<std::mutex> lock(mu_);
      unexpected_.push_back({h, payload});
      cv_.notify_all();
    };
    receiver.closed = [this](Connection*, const Status&) {
      std::lock_guard<std::mutex> lock(mu_);
      ++closed_calls_;
      cv_.notify_all();
    };
    std::thread accept([&] { ASSERT_TRUE(listener->Accept(10, receiver, &receiver_).ok()); });
    ASSERT_TRUE(transport_->Connect(listener->address(), "receiver", 10, Handlers{}, &sender_).ok());
    accept.join();
    ASSERT_TRUE(receiver_ && sender_);
  }
  void TearDown() override {
    if (sender_) sender_->Close(Status::Shutdown("test over"));
    if (receiver_) receiver_->Close(Status::Shutdown("test over"));
    WaitClosed();
    sender_.reset();
    receiver_.reset();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    transport_.reset();
  }
  bool WaitClosed() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return closed_calls_ > 0; });
  }
  bool WaitUnexpected(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return unexpected_.size() >= n; });
  }

  std::unique_ptr<Transport> transport_;
  std::shared_ptr<Connection> sender_, receiver_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<MessageHeader, std::string>> unexpected_;
  int closed_calls_ = 0;
};

TEST_P(TransportConformance, PostedReceiveGetsThePayloadInPlace) {
  std::vector<float> out(1 << 18, 0.f), in(1 << 18);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);
  Completion received, sent;
  receiver_->PostReceive(7, 3, out.data(), out.size() * 4, received.callback());
  sender_->Send(DataHeader(7, 3, in.size() * 4), in.data(), sent.callback());
  ASSERT_TRUE(received.Wait());
  ASSERT_TRUE(sent.Wait());
  EXPECT_TRUE(received.status().ok()) << received.status().message();
  EXPECT_TRUE(sent.status().ok()) << sent.status().message();
  EXPECT_EQ(memcmp(out.data(), in.data(), in.size() * 4), 0);
  EXPECT_EQ(received.calls(), 1);
}

TEST_P(TransportConformance, ManyReceivesCompleteEachExactlyOnce) {
  constexpr int kMessages = 64;
  std::vector<std::vector<int32_t>> out(kMessages, std::vector<int32_t>(1000, 0));
  std::vector<std::vector<int32_t>> in(kMessages);
  std::vector<Completion> received(kMessages), sent(kMessages);
  for (int i = 0; i < kMessages; ++i) {
    in[i].assign(1000, i + 1);
    receiver_->PostReceive(100 + i, 0, out[i].data(), 4000, received[i].callback());
  }
  for (int i = kMessages - 1; i >= 0; --i) sender_->Send(DataHeader(100 + i, 0, 4000), in[i].data(), sent[i].callback());
  for (int i = 0; i < kMessages; ++i) {
    ASSERT_TRUE(received[i].Wait());
    EXPECT_TRUE(received[i].status().ok());
    EXPECT_EQ(out[i][999], i + 1);
    ASSERT_TRUE(sent[i].Wait());
    EXPECT_EQ(received[i].calls(), 1);
  }
}

TEST_P(TransportConformance, UnpostedMessagesReachTheUnexpectedHandler) {
  const std::string text = "server says no";
  MessageHeader h;
  h.type = static_cast<uint16_t>(MessageType::kError);
  h.key = 42;
  h.payload_bytes = text.size();
  Completion sent;
  sender_->Send(h, text.data(), sent.callback());
  ASSERT_TRUE(WaitUnexpected(1));
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_EQ(unexpected_[0].first.key, 42u);
  EXPECT_EQ(unexpected_[0].second, text);
}

TEST_P(TransportConformance, ControlFramesBypassAPostedReceiveOfTheirKey) {
  // A server reports a failed key with an error frame carrying that key.
  std::vector<float> out(64, 0.f);
  Completion received, sent;
  receiver_->PostReceive(55, 0, out.data(), 256, received.callback());
  const std::string text = "ranks disagree on this tensor";
  MessageHeader h;
  h.type = static_cast<uint16_t>(MessageType::kError);
  h.key = 55;
  h.payload_bytes = text.size();
  sender_->Send(h, text.data(), sent.callback());
  ASSERT_TRUE(WaitUnexpected(1));
  {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_EQ(unexpected_[0].second, text);
  }
  EXPECT_EQ(received.calls(), 0) << "the error frame was taken for the posted receive's data";
  receiver_->CancelReceive(55);
  ASSERT_TRUE(received.Wait());
  EXPECT_EQ(received.status().code(), BPS_SHUTDOWN);
}

TEST_P(TransportConformance, CancelledReceiveCompletesAndItsBufferStaysUntouched) {
  std::vector<float> out(4096, 0.f), in(4096, 1.f);
  Completion received, sent;
  receiver_->PostReceive(9, 0, out.data(), out.size() * 4, received.callback());
  receiver_->CancelReceive(9);
  ASSERT_TRUE(received.Wait());
  EXPECT_EQ(received.status().code(), BPS_SHUTDOWN);
  sender_->Send(DataHeader(9, 0, in.size() * 4), in.data(), sent.callback());
  ASSERT_TRUE(sent.Wait());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (float v : out) ASSERT_EQ(v, 0.f) << "a cancelled receive's buffer was written";
  EXPECT_EQ(received.calls(), 1);
}

TEST_P(TransportConformance, CancelDuringAPayloadStopsWritingBeforeTheCallback) {
  const size_t count = 16 << 20;  // 64 MB: still arriving when the first bytes are seen
  std::vector<float> out(count, 0.f), in(count, 1.f);
  Completion received, sent;
  receiver_->PostReceive(11, 0, out.data(), count * 4, received.callback());
  sender_->Send(DataHeader(11, 0, count * 4), in.data(), sent.callback());
  volatile float* first = out.data();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (*first == 0.f && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  receiver_->CancelReceive(11);
  ASSERT_TRUE(received.Wait());
  std::vector<float> at_callback(out);
  ASSERT_TRUE(sent.Wait());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  if (received.status().ok()) {
    // The whole payload arrived before the cancel: then it is complete.
    EXPECT_EQ(memcmp(out.data(), in.data(), count * 4), 0);
  } else {
    EXPECT_EQ(received.status().code(), BPS_SHUTDOWN);
    EXPECT_EQ(memcmp(out.data(), at_callback.data(), count * 4), 0) << "bytes landed after the cancel callback";
  }
  EXPECT_EQ(received.calls(), 1);
  // The connection stays usable after a cancel.
  std::vector<float> small_out(16, 0.f), small_in(16, 5.f);
  Completion again, again_sent;
  receiver_->PostReceive(12, 0, small_out.data(), 64, again.callback());
  sender_->Send(DataHeader(12, 0, 64), small_in.data(), again_sent.callback());
  ASSERT_TRUE(again.Wait());
  EXPECT_TRUE(again.status().ok());
  EXPECT_EQ(small_out[15], 5.f);
}

TEST_P(TransportConformance, ASizeMismatchFailsTheReceiveNotTheConnection) {
  std::vector<float> out(100, 0.f), in(200, 1.f);
  Completion received, sent;
  receiver_->PostReceive(13, 0, out.data(), 400, received.callback());
  sender_->Send(DataHeader(13, 0, 800), in.data(), sent.callback());
  ASSERT_TRUE(received.Wait());
  EXPECT_EQ(received.status().code(), BPS_PEER_FAILURE);
  for (float v : out) ASSERT_EQ(v, 0.f);
}

TEST_P(TransportConformance, ClosingFailsEveryPendingCallbackOnce) {
  std::vector<std::vector<char>> out(3, std::vector<char>(64));
  std::vector<Completion> received(3);
  for (int i = 0; i < 3; ++i) receiver_->PostReceive(20 + i, 0, out[i].data(), 64, received[i].callback());
  sender_->Close(Status::Shutdown("peer leaves"));
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(received[i].Wait()) << "a pending receive never completed after the peer closed";
    EXPECT_FALSE(received[i].status().ok());
    EXPECT_EQ(received[i].calls(), 1);
  }
  ASSERT_TRUE(WaitClosed());
  Completion late_receive, late_send;
  receiver_->PostReceive(30, 0, out[0].data(), 64, late_receive.callback());
  ASSERT_TRUE(late_receive.Wait());
  EXPECT_FALSE(late_receive.status().ok());
  sender_->Send(DataHeader(31, 0, 64), out[1].data(), late_send.callback());
  ASSERT_TRUE(late_send.Wait());
  EXPECT_FALSE(late_send.status().ok());
}

TEST(TransportFactory, UnknownNamesAreRefusedNamingTheKnownOnes) {
  std::unique_ptr<Transport> t;
  Status st = CreateTransport("carrier-pigeon", TransportOptions(), &t);
  EXPECT_EQ(st.code(), BPS_INVALID_ARGUMENT);
  EXPECT_NE(st.message().find("tcp"), std::string::npos) << st.message();
}

INSTANTIATE_TEST_SUITE_P(EveryTransport, TransportConformance, ::testing::Values(std::string("tcp")),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace transport
}  // namespace bps
