// The transport conformance suite: the semantics of transport/transport.h,
// written once and instantiated for every implementation (test_matrix.h:
// tcp today; an RDMA sibling adds its name there). Frames are the suite's own
// (test_frames.h): a transport knows no tensors.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "completion.h"
#include "test_frames.h"
#include "test_matrix.h"
#include "transport/transport.h"

namespace bps {
namespace transport {
namespace {

constexpr char kToken[] = "conformance-token";

using testing_frames::DataHeader;
using testing_frames::TestFrameRules;
using testing_frames::TextHeader;

Handlers Speaking(Handlers h) {
  h.frames = &TestFrameRules();
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
    ASSERT_TRUE(transport_->Listen("127.0.0.1", 0, &listener).ok());
    Handlers receiver;
    receiver.frames = &TestFrameRules();
    receiver.unexpected = [this](Connection*, const FrameHeader& h, const std::string& payload) {
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
    ASSERT_TRUE(transport_->Connect(listener->address(), "receiver", 10, Speaking(Handlers{}), &sender_).ok());
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
  std::vector<std::pair<FrameHeader, std::string>> unexpected_;
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
  FrameHeader h = TextHeader(42, text.size());
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
  FrameHeader h = TextHeader(55, text.size());
  sender_->Send(h, text.data(), sent.callback());
  ASSERT_TRUE(WaitUnexpected(1));
  {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_EQ(unexpected_[0].second, text);
  }
  EXPECT_EQ(received.calls(), 0) << "the error frame was taken for the posted receive's data";
  receiver_->CancelReceive(55);
  ASSERT_TRUE(received.Wait());
  EXPECT_EQ(received.status().code(), StatusCode::kShutdown);
}

TEST_P(TransportConformance, CancelledReceiveCompletesAndItsBufferStaysUntouched) {
  std::vector<float> out(4096, 0.f), in(4096, 1.f);
  Completion received, sent;
  receiver_->PostReceive(9, 0, out.data(), out.size() * 4, received.callback());
  receiver_->CancelReceive(9);
  ASSERT_TRUE(received.Wait());
  EXPECT_EQ(received.status().code(), StatusCode::kShutdown);
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
    EXPECT_EQ(received.status().code(), StatusCode::kShutdown);
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
  EXPECT_EQ(received.status().code(), StatusCode::kPeerFailure);
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

// The accepting side of servers and the scheduler: peers admitted in the
// background, framed connections whose data lands in the receiver's own
// buffers, and blocking streams.
class ListenerConformance : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<Transport> Make(const std::string& token, Role role, int rank) {
    TransportOptions options;
    options.auth = PeerAuth{token, role, rank};
    options.liveness_seconds = 30;
    std::unique_ptr<Transport> t;
    EXPECT_TRUE(CreateTransport(GetParam(), options, &t).ok());
    return t;
  }
};

TEST_P(ListenerConformance, AdmittedPeersDeliverDataIntoTheReceiversOwnBuffers) {
  auto server = Make(kToken, Role::kServer, 0);
  auto worker = Make(kToken, Role::kWorker, 3);
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(server->Listen("127.0.0.1", 0, &listener).ok());
  std::mutex mu;
  std::condition_variable cv;
  PeerIdentity admitted;
  std::vector<float> landing(1000, 0.f);
  std::vector<std::string> texts;
  int arrivals = 0;
  std::shared_ptr<Connection> accepted;
  AcceptOptions options;
  options.owner = "conformance server";
  ASSERT_TRUE(listener
                  ->AcceptConnections(options,
                                      [&](const std::shared_ptr<Connection>& conn, const PeerIdentity& peer,
                                          Handlers* h) {
                                        std::lock_guard<std::mutex> lock(mu);
                                        admitted = peer;
                                        accepted = conn;
                                        h->frames = &TestFrameRules();
                                        h->destination = [&](Connection*, const FrameHeader& f, Status* reject) {
                                          if (f.payload_bytes > landing.size() * 4) {
                                            *reject = Status::PeerFailure("too big");
                                            return static_cast<void*>(nullptr);
                                          }
                                          return static_cast<void*>(landing.data());
                                        };
                                        h->arrived = [&](Connection*, const FrameHeader& f, void* payload) {
                                          std::lock_guard<std::mutex> lock(mu);
                                          EXPECT_EQ(payload, landing.data());
                                          EXPECT_EQ(f.key, 9u);
                                          ++arrivals;
                                          cv.notify_all();
                                        };
                                        h->unexpected = [&](Connection*, const FrameHeader&, const std::string& t) {
                                          std::lock_guard<std::mutex> lock(mu);
                                          texts.push_back(t);
                                          cv.notify_all();
                                        };
                                        return true;
                                      })
                  .ok());
  std::shared_ptr<Connection> conn;
  ASSERT_TRUE(worker->Connect(listener->address(), "server", 10, Speaking(Handlers{}), &conn).ok());
  std::vector<float> in(1000, 2.5f);
  Completion sent;
  conn->Send(DataHeader(9, 0, in.size() * 4), in.data(), sent.callback());
  const std::string text = "a note\x1b[2J";
  conn->Send(TextHeader(1, text.size()), text.data(), [](const Status&) {});
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return arrivals == 1 && texts.size() == 1; }));
    EXPECT_EQ(admitted.role, Role::kWorker);
    EXPECT_EQ(admitted.rank, 3);
    EXPECT_EQ(landing[999], 2.5f);
    EXPECT_EQ(texts[0].find('\x1b'), std::string::npos) << "text frames reach handlers escaped";
  }
  ASSERT_TRUE(sent.Wait());
  listener->StopAccepting();
  conn->Close(Status::Shutdown("test over"));
  conn.reset();
  worker.reset();
  listener.reset();
  server.reset();
}

// A server that already failed tells a peer admitted after the failure
// why, in the admission itself (issue 30: workers still starting up when the
// scheduler died named the server that closed on them, not the scheduler).
TEST_P(ListenerConformance, AFrameSentWhileAdmittingReachesThePeerFirst) {
  auto server = Make(kToken, Role::kServer, 0);
  auto worker = Make(kToken, Role::kWorker, 1);
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(server->Listen("127.0.0.1", 0, &listener).ok());
  const std::string why = "lost the scheduler";
  Completion written;
  std::shared_ptr<Connection> accepted;
  ASSERT_TRUE(listener
                  ->AcceptConnections(AcceptOptions(),
                                      [&](const std::shared_ptr<Connection>& conn, const PeerIdentity&, Handlers* h) {
                                        accepted = conn;
                                        h->frames = &TestFrameRules();
                                        h->unexpected = [](Connection*, const FrameHeader&, const std::string&) {};
                                        conn->Send(TextHeader(7, why.size()), why.data(), written.callback());
                                        return true;
                                      })
                  .ok());
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> texts;
  Handlers mine;
  mine.unexpected = [&](Connection*, const FrameHeader& f, const std::string& text) {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(f.key, 7u);
    texts.push_back(text);
    cv.notify_all();
  };
  std::shared_ptr<Connection> conn;
  ASSERT_TRUE(worker->Connect(listener->address(), "server", 10, Speaking(mine), &conn).ok());
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return texts.size() == 1; }));
    EXPECT_EQ(texts[0], why);
  }
  ASSERT_TRUE(written.Wait());
  EXPECT_TRUE(written.status().ok()) << written.status().message();
  listener->StopAccepting();
  conn->Close(Status::Shutdown("test over"));
  conn.reset();
  accepted.reset();
  worker.reset();
  listener.reset();
  server.reset();
}

TEST_P(ListenerConformance, StreamsCarryBytesBothWaysAndNoticeTheHangUp) {
  auto server = Make(kToken, Role::kScheduler, -1);
  auto client = Make(kToken, Role::kWorker, 1);
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(server->Listen("127.0.0.1", 0, &listener).ok());
  std::mutex mu;
  std::condition_variable cv;
  std::unique_ptr<Stream> served;
  PeerIdentity who;
  ASSERT_TRUE(listener
                  ->AcceptStreams(AcceptOptions(),
                                  [&](std::unique_ptr<Stream> s, const PeerIdentity& peer) {
                                    std::lock_guard<std::mutex> lock(mu);
                                    served = std::move(s);
                                    who = peer;
                                    cv.notify_all();
                                  })
                  .ok());
  std::unique_ptr<Stream> stream;
  Status st = client->ConnectStream(listener->address(), "scheduler", 10, &stream);
  ASSERT_TRUE(st.ok()) << st.message();
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return served != nullptr; }));
  }
  EXPECT_EQ(who.rank, 1);
  ASSERT_TRUE(stream->Write("ping", 4, 1000).ok());
  char got[4];
  ASSERT_TRUE(served->Read(got, 4, 1000).ok());
  EXPECT_EQ(std::string(got, 4), "ping");
  EXPECT_EQ(served->Read(got, 1, 100).code(), StatusCode::kTimeout);
  EXPECT_FALSE(served->PeerHungUp());
  stream.reset();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!served->PeerHungUp() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(served->PeerHungUp());
  listener->StopAccepting();
}

TEST_P(ListenerConformance, APeerWithoutTheTokenIsNeverAdmitted) {
  auto server = Make(kToken, Role::kServer, 0);
  auto stranger = Make("another-job", Role::kWorker, 0);
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(server->Listen("127.0.0.1", 0, &listener).ok());
  std::atomic<int> admitted{0};
  ASSERT_TRUE(listener
                  ->AcceptConnections(AcceptOptions(),
                                      [&](const std::shared_ptr<Connection>&, const PeerIdentity&, Handlers* h) {
                                        h->frames = &TestFrameRules();
                                        ++admitted;
                                        return true;
                                      })
                  .ok());
  std::shared_ptr<Connection> conn;
  Status st = stranger->Connect(listener->address(), "server", 5, Speaking(Handlers{}), &conn);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("BYTEPS_JOB_TOKEN"), std::string::npos) << st.message();
  std::unique_ptr<Stream> stream;
  EXPECT_FALSE(stranger->ConnectStream(listener->address(), "scheduler", 5, &stream).ok());
  listener->StopAccepting();
  EXPECT_EQ(admitted.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(EveryTransport, ListenerConformance, ::testing::ValuesIn(testing_support::Transports()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(TransportFactory, UnknownNamesAreRefusedNamingTheKnownOnes) {
  std::unique_ptr<Transport> t;
  Status st = CreateTransport("carrier-pigeon", TransportOptions(), &t);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("tcp"), std::string::npos) << st.message();
}

INSTANTIATE_TEST_SUITE_P(EveryTransport, TransportConformance, ::testing::ValuesIn(testing_support::Transports()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace transport
}  // namespace bps
