// Transport conformance with several connections spread over several I/O
// threads (how the engine talks to a server with BYTEPS_TCP_CONNECTIONS > 1):
// each connection keeps its own order, payloads land where their receive
// was posted whichever thread carries them, connections really run on
// different threads, and a failure or shutdown reaches every pending
// callback of every connection exactly once. Instantiated per transport.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "completion.h"
#include "test_frames.h"
#include "test_matrix.h"
#include "transport/transport.h"

namespace bps {
namespace transport {
namespace {

constexpr char kToken[] = "multi-connection-token";
constexpr int kConnections = 4;

std::unique_ptr<Transport> MakeTransport(const std::string& name, int io_threads) {
  TransportOptions options;
  options.auth.token = kToken;
  options.liveness_seconds = 30;
  options.io_threads = io_threads;
  std::unique_ptr<Transport> t;
  EXPECT_TRUE(CreateTransport(name, options, &t).ok());
  return t;
}

// Senders in one transport (a worker process), receivers in another (a
// server process), kConnections connections between them.
class MultiConnection : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    senders_transport_ = MakeTransport(GetParam(), kConnections);
    receivers_transport_ = MakeTransport(GetParam(), kConnections);
    ASSERT_TRUE(senders_transport_ && receivers_transport_);
    std::unique_ptr<Listener> listener;
    ASSERT_TRUE(receivers_transport_->Listen("127.0.0.1", 0, &listener).ok());
    for (int i = 0; i < kConnections; ++i) {
      Handlers receiver;
      receiver.frames = &testing_frames::TestFrameRules();
      receiver.unexpected = [this, i](Connection*, const FrameHeader& h, const std::string& payload) {
        std::lock_guard<std::mutex> lock(mu_);
        control_[i].push_back(payload);
        receiving_threads_[i].insert(std::this_thread::get_id());
        cv_.notify_all();
      };
      receiver.closed = [this, i](Connection*, const Status&) {
        std::lock_guard<std::mutex> lock(mu_);
        ++receiver_closed_[i];
        cv_.notify_all();
      };
      std::shared_ptr<Connection> accepted, connected;
      std::thread accept([&] { ASSERT_TRUE(listener->Accept(10, receiver, &accepted).ok()); });
      Handlers sender;
      sender.frames = &testing_frames::TestFrameRules();
      sender.closed = [this, i](Connection*, const Status&) {
        std::lock_guard<std::mutex> lock(mu_);
        ++sender_closed_[i];
        cv_.notify_all();
      };
      ASSERT_TRUE(senders_transport_->Connect(listener->address(), "receiver " + std::to_string(i), 10, sender,
                                              &connected).ok());
      accept.join();
      ASSERT_TRUE(accepted && connected);
      receivers_.push_back(accepted);
      senders_.push_back(connected);
    }
  }
  void TearDown() override {
    senders_.clear();
    receivers_.clear();
    senders_transport_.reset();  // closes every connection it still has
    receivers_transport_.reset();
  }
  bool WaitFor(const std::function<bool()>& done, double seconds = 10) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::duration<double>(seconds), done);
  }

  std::unique_ptr<Transport> senders_transport_, receivers_transport_;
  std::vector<std::shared_ptr<Connection>> senders_, receivers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int, std::vector<std::string>> control_;
  std::map<int, std::set<std::thread::id>> receiving_threads_;
  std::map<int, int> receiver_closed_, sender_closed_;
};

// The control frame that carries a payload.
FrameHeader ControlHeader(uint64_t key, size_t bytes) { return testing_frames::TextHeader(key, bytes); }

FrameHeader DataHeader(uint64_t key, uint64_t bytes) { return testing_frames::DataHeader(key, 0, bytes); }

TEST_P(MultiConnection, EachConnectionKeepsItsOrderAndPayloadsLandInTheirBuffers) {
  constexpr int kMessages = 200;
  constexpr size_t kFloats = 64 << 10;  // 256 KB: several segments, interleaved across threads
  // Data receives: one per (connection, message) key, all posted up front.
  std::vector<std::vector<float>> out(kConnections * kMessages);
  std::vector<Completion> received(kConnections * kMessages);
  for (int i = 0; i < kConnections; ++i) {
    for (int j = 0; j < kMessages; ++j) {
      const int slot = i * kMessages + j;
      if (j % 8 != 0) continue;  // every 8th message carries data; the rest are control frames
      out[slot].assign(kFloats, 0.f);
      receivers_[i]->PostReceive(1000 * (i + 1) + j, 0, out[slot].data(), kFloats * 4, received[slot].callback());
    }
  }
  std::vector<std::vector<float>> in(kConnections, std::vector<float>(kFloats));
  for (int i = 0; i < kConnections; ++i) {
    for (size_t k = 0; k < kFloats; ++k) in[i][k] = static_cast<float>(i * 7 + k % 13);
  }
  // Every connection sends from its own thread at once, as the engine does.
  std::vector<std::string> texts(kConnections * kMessages);
  std::vector<Completion> sent(kConnections * kMessages);
  std::vector<std::thread> threads;
  for (int i = 0; i < kConnections; ++i) {
    threads.emplace_back([&, i] {
      for (int j = 0; j < kMessages; ++j) {
        const int slot = i * kMessages + j;
        if (j % 8 == 0) {
          senders_[i]->Send(DataHeader(1000 * (i + 1) + j, kFloats * 4), in[i].data(), sent[slot].callback());
        } else {
          texts[slot] = std::to_string(i) + ":" + std::to_string(j);
          senders_[i]->Send(ControlHeader(7, texts[slot].size()), texts[slot].data(), sent[slot].callback());
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  const size_t control_per_connection = kMessages - kMessages / 8;
  ASSERT_TRUE(WaitFor([&] {
    for (int i = 0; i < kConnections; ++i) {
      if (control_[i].size() < control_per_connection) return false;
    }
    return true;
  })) << "control frames were lost";
  std::set<std::thread::id> all_threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int i = 0; i < kConnections; ++i) {
      ASSERT_EQ(control_[i].size(), control_per_connection);
      int expected = 0;
      for (const std::string& text : control_[i]) {
        while (expected % 8 == 0) ++expected;
        EXPECT_EQ(text, std::to_string(i) + ":" + std::to_string(expected)) << "connection " << i << " reordered";
        ++expected;
      }
      EXPECT_EQ(receiving_threads_[i].size(), 1u) << "one connection is served by one thread";
      all_threads.insert(receiving_threads_[i].begin(), receiving_threads_[i].end());
    }
  }
  EXPECT_EQ(all_threads.size(), static_cast<size_t>(kConnections))
      << "connections share I/O threads although the transport may start one per connection";
  for (int i = 0; i < kConnections; ++i) {
    for (int j = 0; j < kMessages; j += 8) {
      const int slot = i * kMessages + j;
      ASSERT_TRUE(received[slot].Wait());
      EXPECT_TRUE(received[slot].status().ok()) << received[slot].status().message();
      EXPECT_EQ(received[slot].calls(), 1);
      ASSERT_EQ(memcmp(out[slot].data(), in[i].data(), kFloats * 4), 0) << "connection " << i << " message " << j;
    }
  }
  for (auto& s : sent) {
    ASSERT_TRUE(s.Wait());
    EXPECT_TRUE(s.status().ok());
    EXPECT_EQ(s.calls(), 1);
  }
}

TEST_P(MultiConnection, APeerGoingAwayFailsEveryPendingCallbackOnEveryThreadOnce) {
  constexpr int kPerConnection = 5;
  std::vector<std::vector<char>> out(kConnections * kPerConnection, std::vector<char>(4096));
  std::vector<Completion> received(kConnections * kPerConnection);
  for (int i = 0; i < kConnections; ++i) {
    for (int k = 0; k < kPerConnection; ++k) {
      const int slot = i * kPerConnection + k;
      receivers_[i]->PostReceive(50 + k, 0, out[slot].data(), 4096, received[slot].callback());
    }
  }
  // The whole sending process goes: all of its connections close at once,
  // each on its own thread.
  senders_.clear();
  senders_transport_.reset();
  for (auto& r : received) {
    ASSERT_TRUE(r.Wait()) << "a pending receive never completed after its peer went away";
    EXPECT_FALSE(r.status().ok());
  }
  ASSERT_TRUE(WaitFor([&] {
    for (int i = 0; i < kConnections; ++i) {
      if (receiver_closed_[i] < 1) return false;
    }
    return true;
  }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // room for a duplicate
  for (auto& r : received) EXPECT_EQ(r.calls(), 1);
  std::lock_guard<std::mutex> lock(mu_);
  for (int i = 0; i < kConnections; ++i) EXPECT_EQ(receiver_closed_[i], 1) << "connection " << i;
}

TEST_P(MultiConnection, ShuttingDownTheTransportFailsEveryPendingCallbackOnce) {
  // Receives pending on every connection, and large sends that cannot all be
  // written yet (the peer posts nothing and reads on its own loop).
  constexpr int kPerConnection = 3;
  std::vector<std::vector<char>> out(kConnections * kPerConnection, std::vector<char>(4096));
  std::vector<Completion> received(kConnections * kPerConnection);
  for (int i = 0; i < kConnections; ++i) {
    for (int k = 0; k < kPerConnection; ++k) {
      const int slot = i * kPerConnection + k;
      senders_[i]->PostReceive(70 + k, 0, out[slot].data(), 4096, received[slot].callback());
    }
  }
  std::vector<char> big(32 << 20, 1);
  std::vector<Completion> sent(kConnections * 2);
  for (int i = 0; i < kConnections; ++i) {
    for (int k = 0; k < 2; ++k) senders_[i]->Send(DataHeader(90 + k, big.size()), big.data(), sent[i * 2 + k].callback());
  }
  senders_.clear();
  senders_transport_.reset();  // returns only once every connection reported closed
  for (auto& r : received) {
    EXPECT_EQ(r.calls(), 1) << "a pending receive did not complete exactly once by the transport's shutdown";
    EXPECT_FALSE(r.status().ok());
  }
  for (auto& s : sent) EXPECT_EQ(s.calls(), 1) << "a send did not complete exactly once by the transport's shutdown";
  std::lock_guard<std::mutex> lock(mu_);
  for (int i = 0; i < kConnections; ++i) EXPECT_EQ(sender_closed_[i], 1) << "connection " << i;
}

INSTANTIATE_TEST_SUITE_P(EveryTransport, MultiConnection, ::testing::ValuesIn(testing_support::Transports()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace transport
}  // namespace bps
