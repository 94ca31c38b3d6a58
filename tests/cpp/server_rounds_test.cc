// Server rounds: an in-process Server over the MemoryStore, driven by fake
// workers that reach it through the same transport (each transport of
// test_matrix.h), after the real handshake.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "common/hashing.h"
#include "ps/protocol.h"
#include "server/server.h"
#include "store/memory_store.h"
#include "test_matrix.h"
#include "transport/transport.h"

namespace bps {
namespace {

constexpr char kToken[] = "server-rounds-test-token";

// One fake worker: an authenticated connection that collects responses (into
// buffers it chooses per header) and errors.
class FakeWorker {
 public:
  FakeWorker(const std::string& transport_name, const std::string& address, int rank) : rank_(rank) {
    transport::TransportOptions options;
    options.auth = transport::PeerAuth{kToken, Role::kWorker, rank};
    Status st = transport::CreateTransport(transport_name, options, &transport_);
    EXPECT_TRUE(st.ok()) << st.message();
    transport::Handlers handlers;
    handlers.frames = &PsFrameRules();
    handlers.destination = [this](transport::Connection*, const transport::FrameHeader& h, Status*) -> void* {
      if (h.type != static_cast<uint16_t>(MessageType::kResponse)) return nullptr;
      std::lock_guard<std::mutex> lock(mu_);
      rx_.assign(h.payload_bytes / sizeof(float), 0.f);
      return rx_.data();
    };
    handlers.arrived = [this](transport::Connection*, const transport::FrameHeader& h, void*) {
      std::lock_guard<std::mutex> lock(mu_);
      responses_[{h.key, h.round}] = rx_;
      log_.push_back("response " + std::to_string(h.key) + "/" + std::to_string(h.round));
      cv_.notify_all();
    };
    handlers.unexpected = [this](transport::Connection*, const transport::FrameHeader& h, const std::string& text) {
      std::lock_guard<std::mutex> lock(mu_);
      if (h.type == static_cast<uint16_t>(MessageType::kError)) errors_.push_back(text);
      if (h.type == static_cast<uint16_t>(MessageType::kReceived)) {
        log_.push_back("received " + std::to_string(h.key) + "/" + std::to_string(h.round));
      }
      cv_.notify_all();
    };
    handlers.closed = [this](transport::Connection*, const Status&) {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
      cv_.notify_all();
    };
    st = transport_->Connect(address, "server", 10, handlers, &conn_);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  ~FakeWorker() {
    // The connection calls back into this worker until it reports closed.
    if (conn_) {
      conn_->Close(Status::Shutdown("test over"));
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::seconds(10), [&] { return closed_; });
    }
    conn_.reset();
    transport_.reset();
  }

  void Push(uint64_t key, uint32_t round, const std::vector<float>& data, uint16_t contributors,
            uint64_t signature = 1) {
    auto copy = std::make_shared<std::vector<float>>(data);
    MessageHeader h;
    h.type = static_cast<uint16_t>(MessageType::kPush);
    h.key = key;
    h.name_hash = key;
    h.round = round;
    h.payload_bytes = copy->size() * sizeof(float);
    h.sender_rank = static_cast<uint32_t>(rank_);
    h.dtype = static_cast<uint8_t>(DataType::kFloat32);
    h.num_contributors = contributors;
    h.signature = signature;
    h.tensor_bytes = h.payload_bytes;
    conn_->SendOwned(ToFrame(h), copy, copy->data());
  }
  void Bye() {
    MessageHeader h;
    h.type = static_cast<uint16_t>(MessageType::kBye);
    conn_->Send(ToFrame(h), nullptr, [](const Status&) {});
  }

  std::vector<float> WaitResponse(uint64_t key, uint32_t round) {
    std::unique_lock<std::mutex> lock(mu_);
    bool got = cv_.wait_for(lock, std::chrono::seconds(10), [&] { return responses_.count({key, round}) > 0; });
    EXPECT_TRUE(got) << "no response for key " << key << " round " << round;
    return got ? responses_[{key, round}] : std::vector<float>();
  }
  std::string WaitError() {
    std::unique_lock<std::mutex> lock(mu_);
    bool got = cv_.wait_for(lock, std::chrono::seconds(10), [&] { return !errors_.empty(); });
    EXPECT_TRUE(got) << "no error frame";
    return got ? errors_.front() : "";
  }
  // The receipts and responses this worker got, in arrival order.
  bool WaitLogged(const std::string& entry) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10),
                        [&] { return std::find(log_.begin(), log_.end(), entry) != log_.end(); });
  }
  std::vector<std::string> Log() {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }
  bool HasResponse(uint64_t key, uint32_t round) {
    std::lock_guard<std::mutex> lock(mu_);
    return responses_.count({key, round}) > 0;
  }

 private:
  int rank_;
  std::unique_ptr<transport::Transport> transport_;
  std::shared_ptr<transport::Connection> conn_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<float> rx_;
  std::map<std::pair<uint64_t, uint32_t>, std::vector<float>> responses_;
  std::vector<std::string> errors_;
  std::vector<std::string> log_;
  bool closed_ = false;
};

class ServerRounds : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    config_.job_token = kToken;
    config_.server_engine_threads = 2;
    config_.timeout_seconds = 10;
    config_.rendezvous_timeout_seconds = 10;
    Configure(&config_);
    store_ = std::make_shared<MemoryStore>();
    std::unique_ptr<transport::Transport> transport;
    ASSERT_TRUE(transport::CreateTransport(GetParam(), Server::TransportOptionsFor(config_, 0), &transport).ok());
    server_.reset(new Server(config_, store_, 0, "127.0.0.1", std::move(transport)));
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_TRUE(store_->Get("server/0", 5, &address_).ok());
  }
  void TearDown() override {
    workers_.clear();
    server_->Stop();
  }
  virtual void Configure(Config*) {}
  FakeWorker& AddWorker(int rank) {
    workers_.emplace_back(new FakeWorker(GetParam(), address_, rank));
    return *workers_.back();
  }

  Config config_;
  std::shared_ptr<MemoryStore> store_;
  std::unique_ptr<Server> server_;
  std::string address_;
  std::vector<std::unique_ptr<FakeWorker>> workers_;
};

TEST_P(ServerRounds, SumsEachRoundAndAnswersEveryContributor) {
  FakeWorker& a = AddWorker(0);
  FakeWorker& b = AddWorker(1);
  const uint64_t key = HashName("w");
  for (uint32_t round = 0; round < 5; ++round) {
    a.Push(key, round, std::vector<float>(1000, 1.0f + round), 2);
    b.Push(key, round, std::vector<float>(1000, 10.0f), 2);
    for (FakeWorker* w : {&a, &b}) {
      auto got = w->WaitResponse(key, round);
      ASSERT_EQ(got.size(), 1000u);
      for (float v : got) ASSERT_EQ(v, 11.0f + round);
    }
  }
}

TEST_P(ServerRounds, ARoundCompletesOnlyWithEveryContribution) {
  FakeWorker& a = AddWorker(0);
  FakeWorker& b = AddWorker(1);
  const uint64_t key = HashName("late");
  a.Push(key, 0, std::vector<float>(64, 2.0f), 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(a.HasResponse(key, 0)) << "answered before the second contribution";
  b.Push(key, 0, std::vector<float>(64, 3.0f), 2);
  auto got = a.WaitResponse(key, 0);
  ASSERT_EQ(got.size(), 64u);
  EXPECT_EQ(got[0], 5.0f);
}

// A push is acknowledged as soon as it arrived, before its round can
// complete, and before its answer on the same connection: the worker's
// scheduling credit comes back then (issue 38), so machines whose windows
// hold different partitions never wait for each other's credits.
TEST_P(ServerRounds, APushIsAcknowledgedOnArrivalBeforeItsAnswer) {
  FakeWorker& a = AddWorker(0);
  FakeWorker& b = AddWorker(1);
  const uint64_t key = HashName("acknowledged");
  const std::string received = "received " + std::to_string(key) + "/0";
  const std::string response = "response " + std::to_string(key) + "/0";
  a.Push(key, 0, std::vector<float>(4096, 2.0f), 2);
  ASSERT_TRUE(a.WaitLogged(received)) << "no receipt for a push whose round is still open";
  EXPECT_FALSE(a.HasResponse(key, 0));
  b.Push(key, 0, std::vector<float>(4096, 3.0f), 2);
  for (FakeWorker* w : {&a, &b}) {
    ASSERT_TRUE(w->WaitLogged(response));
    const std::vector<std::string> log = w->Log();
    const auto r = std::find(log.begin(), log.end(), received);
    ASSERT_NE(r, log.end()) << "answered without a receipt";
    EXPECT_LT(r - log.begin(), std::find(log.begin(), log.end(), response) - log.begin())
        << "the answer came before the receipt";
  }
}

TEST_P(ServerRounds, KeysAreIndependent) {
  FakeWorker& a = AddWorker(0);
  FakeWorker& b = AddWorker(1);
  for (uint64_t k = 1; k <= 16; ++k) a.Push(k, 0, std::vector<float>(32, static_cast<float>(k)), 2);
  for (uint64_t k = 16; k >= 1; --k) b.Push(k, 0, std::vector<float>(32, 1.0f), 2);
  for (uint64_t k = 1; k <= 16; ++k) EXPECT_EQ(b.WaitResponse(k, 0).at(0), k + 1.0f);
}

TEST_P(ServerRounds, DisagreeingContributionsFailBothWorkersNamingTheRanks) {
  FakeWorker& a = AddWorker(0);
  FakeWorker& b = AddWorker(1);
  const uint64_t key = HashName("fc1.weight");
  a.Push(key, 0, std::vector<float>(50, 1.0f), 2, /*signature=*/111);
  b.Push(key, 0, std::vector<float>(60, 1.0f), 2, /*signature=*/222);
  for (FakeWorker* w : {&a, &b}) {
    std::string err = w->WaitError();
    EXPECT_NE(err.find("rank 0"), std::string::npos) << err;
    EXPECT_NE(err.find("rank 1"), std::string::npos) << err;
  }
}

TEST_P(ServerRounds, WaitEndsWhenEveryWorkerSaidGoodbye) {
  ASSERT_TRUE(store_->Set("size", "2").ok());
  FakeWorker& a = AddWorker(0);
  FakeWorker& b = AddWorker(1);
  a.Bye();
  b.Bye();
  Status st = server_->Wait(10);
  EXPECT_TRUE(st.ok()) << st.message();
}

TEST_P(ServerRounds, WaitCountsWorkerRanksNotConnections) {
  // BYTEPS_TCP_CONNECTIONS defaults by core count, so ranks may open
  // different numbers of connections: two connections of rank 0 are not two
  // workers.
  ASSERT_TRUE(store_->Set("size", "2").ok());
  FakeWorker& a = AddWorker(0);
  FakeWorker& a_again = AddWorker(0);
  a.Bye();
  a_again.Bye();
  Status early = server_->Wait(0.5);
  EXPECT_EQ(early.code(), StatusCode::kTimeout) << "the server ended before rank 1 came: " << early.message();
  FakeWorker& b = AddWorker(1);
  b.Bye();
  Status st = server_->Wait(10);
  EXPECT_TRUE(st.ok()) << st.message();
}

TEST_P(ServerRounds, ConcurrentWorkersOnSeveralLoopsSumEveryKeyExactly) {
  // Four ranks, two with a second connection, over the server's loops
  // (BYTEPS_SERVER_ENGINE_THREAD=2 here): every key's rounds are summed on
  // whichever loop received each push, under that key's lock only.
  constexpr int kRanks = 4;
  constexpr int kKeys = 24;
  constexpr uint32_t kRounds = 4;
  std::vector<FakeWorker*> conns;
  for (int r = 0; r < kRanks; ++r) conns.push_back(&AddWorker(r));
  FakeWorker* second[2] = {&AddWorker(0), &AddWorker(1)};
  auto size_of = [](int k) { return static_cast<size_t>(k % 3 == 0 ? (256 << 10) : 1000 + 17 * k); };
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      for (uint32_t round = 0; round < kRounds; ++round) {
        for (int k = 0; k < kKeys; ++k) {
          // Keys alternate between a rank's connections, as the engine spreads them.
          FakeWorker* w = (r < 2 && k % 2) ? second[r] : conns[r];
          w->Push(1000 + k, round, std::vector<float>(size_of(k), static_cast<float>(r + 1) * (round + 1)), kRanks);
        }
        for (int k = 0; k < kKeys; ++k) {
          FakeWorker* w = (r < 2 && k % 2) ? second[r] : conns[r];
          auto got = w->WaitResponse(1000 + k, round);
          const float want = 10.0f * (round + 1);  // (1 + 2 + 3 + 4) x (round + 1)
          if (got.size() != size_of(k) || got.front() != want || got.back() != want) ++mismatches;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(EveryTransport, ServerRounds, ::testing::ValuesIn(testing_support::Transports()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// The server's buffer pool (server/buffer_pool.h): pushes, sums and answers
// of every key share pooled buffers, so a key seen for the first time takes
// memory earlier keys let go, and what waits free stays under the bound.
class ServerBufferPooling : public ServerRounds {
 protected:
  static constexpr size_t kFloats = 16384;  // 64 KiB pushes: one partition
  static constexpr size_t kBytes = kFloats * sizeof(float);
  void Configure(Config* c) override {
    c->partition_bytes = kBytes;  // the pool warms buffers of this size
    c->server_buffer_pool_bytes = keep_bytes_;
  }
  // Waits (bounded) until `done` holds for the server's pool statistics.
  bool PoolReaches(const std::function<bool(const BufferPoolStats&)>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done(server_->buffer_stats())) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
  }
  // Rank 0 pushes a pattern that differs per key and element, rank 1 a
  // constant: a buffer that carried another key's data shows in the sum.
  static std::vector<float> Pattern(int key) {
    std::vector<float> v(kFloats);
    for (size_t i = 0; i < kFloats; ++i) v[i] = static_cast<float>(key * 1000 + static_cast<int>(i % 1000));
    return v;
  }
  static int WrongElements(const std::vector<float>& got, int key) {
    if (got.size() != kFloats) return static_cast<int>(kFloats);
    int wrong = 0;
    for (size_t i = 0; i < kFloats; ++i) wrong += got[i] != static_cast<float>(key * 1000 + static_cast<int>(i % 1000)) + 0.5f;
    return wrong;
  }
  uint64_t keep_bytes_ = uint64_t{256} << 20;
};

TEST_P(ServerBufferPooling, NewKeysTakeWarmBuffersAndSumExactly) {
  // The pool warms a few partitions' worth at start.
  ASSERT_TRUE(PoolReaches([](const BufferPoolStats& s) { return s.free_bytes >= Server::kWarmPartitions * kBytes; }))
      << "the pool did not warm " << Server::kWarmPartitions << " buffers";
  const BufferPoolStats warm = server_->buffer_stats();
  FakeWorker& a = AddWorker(0);
  FakeWorker& b = AddWorker(1);
  constexpr int kKeys = 64;  // each seen for the first time, one after the other
  for (int k = 0; k < kKeys; ++k) {
    a.Push(5000 + k, 0, Pattern(k), 2);
    b.Push(5000 + k, 0, std::vector<float>(kFloats, 0.5f), 2);
    EXPECT_EQ(WrongElements(a.WaitResponse(5000 + k, 0), k), 0) << "key " << k << " (rank 0)";
    EXPECT_EQ(WrongElements(b.WaitResponse(5000 + k, 0), k), 0) << "key " << k << " (rank 1)";
  }
  const BufferPoolStats after = server_->buffer_stats();
  // Before the pool, every key kept its answer's buffer: 64 keys, 64 fresh
  // buffers. Now a round holds two or three, freed when it is answered.
  EXPECT_LT(after.allocations - warm.allocations, 16u);
  EXPECT_GE(after.reuses - warm.reuses, static_cast<uint64_t>(kKeys));
  EXPECT_LE(after.peak_held_bytes, (Server::kWarmPartitions + 16) * kBytes);
  // A key that comes back sums on whatever buffers it takes now.
  a.Push(5000, 1, Pattern(0), 2);
  b.Push(5000, 1, std::vector<float>(kFloats, 0.5f), 2);
  EXPECT_EQ(WrongElements(a.WaitResponse(5000, 1), 0), 0);
  EXPECT_EQ(WrongElements(b.WaitResponse(5000, 1), 0), 0);
}

class ServerBufferPoolBound : public ServerBufferPooling {
 protected:
  void Configure(Config* c) override {
    keep_bytes_ = 3 * kBytes;  // BYTEPS_SERVER_BUFFER_POOL
    ServerBufferPooling::Configure(c);
  }
};

TEST_P(ServerBufferPoolBound, KeepsAtMostItsBoundFreeAndSumsExactly) {
  FakeWorker& a = AddWorker(0);
  FakeWorker& b = AddWorker(1);
  constexpr int kKeys = 32;  // all in flight at once: far more buffers than the bound
  for (int k = 0; k < kKeys; ++k) a.Push(7000 + k, 0, Pattern(k), 2);
  for (int k = kKeys - 1; k >= 0; --k) b.Push(7000 + k, 0, std::vector<float>(kFloats, 0.5f), 2);
  for (int k = 0; k < kKeys; ++k) {
    EXPECT_EQ(WrongElements(a.WaitResponse(7000 + k, 0), k), 0) << "key " << k << " (rank 0)";
    EXPECT_EQ(WrongElements(b.WaitResponse(7000 + k, 0), k), 0) << "key " << k << " (rank 1)";
  }
  // Once every answer is written, the server holds only what waits free,
  // within the bound; the rest went back to the system.
  EXPECT_TRUE(PoolReaches([](const BufferPoolStats& s) { return s.held_bytes == s.free_bytes; }))
      << "buffers still held after every round was answered: " << server_->buffer_stats().held_bytes << " bytes";
  const BufferPoolStats idle = server_->buffer_stats();
  EXPECT_LE(idle.free_bytes, 3 * kBytes);
  EXPECT_EQ(idle.keep_bytes, 3 * kBytes);
  EXPECT_GT(idle.peak_held_bytes, 3 * kBytes) << "the rounds in flight needed more than the bound";
}

INSTANTIATE_TEST_SUITE_P(EveryTransport, ServerBufferPooling, ::testing::ValuesIn(testing_support::Transports()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(EveryTransport, ServerBufferPoolBound, ::testing::ValuesIn(testing_support::Transports()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace bps
