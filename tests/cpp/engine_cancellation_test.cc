// Bug 1: a failed op completes only once no byte can land in its buffers.
// A fake server answers a push with half of its response, then stalls until
// the engine has failed the op by timeout; the rest of the response arriving
// afterwards must not be written into the user's output tensor.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "common/net_util.h"
#include "c_api/process_engine.h"
#include "core/engine.h"
#include "engine_harness.h"
#include "ps/protocol.h"
#include "transport/tcp/handshake.h"

namespace bps {
namespace {

using testing_support::InProcessScheduler;
using testing_support::ScopedEnv;

bool WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = recv(fd, p, n, 0);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

struct Completion {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  StatusCode code = StatusCode::kOk;
  std::string message;
  std::vector<float> output_at_done;
  const float* output = nullptr;
  size_t count = 0;
};

void OnDone(void* user_data, int32_t code, const char* message) {
  auto* c = static_cast<Completion*>(user_data);
  std::lock_guard<std::mutex> lock(c->mu);
  c->output_at_done.assign(c->output, c->output + c->count);  // what the user sees at done()
  c->code = static_cast<StatusCode>(code);
  c->message = message ? message : "";
  c->done = true;
  c->cv.notify_all();
}

TEST(EngineCancellation, NoResponseByteLandsInTheOutputAfterAFailedOpCompletes) {
  const std::string token = "cancellation-test-token";
  InProcessScheduler scheduler(token);
  int listen_fd = -1, port = 0;
  ASSERT_TRUE(ListenOn("127.0.0.1", 0, 16, &listen_fd, &port).ok());
  ASSERT_TRUE(scheduler.store().Set("server/0", "127.0.0.1:" + std::to_string(port)).ok());

  constexpr size_t kCount = 64 * 1024;  // 256 KB: one partition
  std::mutex mu;
  std::condition_variable cv;
  bool send_rest = false, finish = false;
  std::atomic<bool> first_half_sent{false};
  std::thread fake_server([&] {
    int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    ASSERT_GE(fd, 0);
    PeerIdentity peer;
    ASSERT_TRUE(AcceptHandshake(fd, token, 5000, &peer).ok());
    MessageHeader push;
    ASSERT_TRUE(ReadAll(fd, &push, sizeof(push)));
    std::vector<char> payload(push.payload_bytes);
    ASSERT_TRUE(ReadAll(fd, payload.data(), payload.size()));
    MessageHeader response = push;
    response.type = static_cast<uint16_t>(MessageType::kResponse);
    std::vector<float> first(kCount / 2, 5.0f), rest(kCount / 2, 9.0f);
    ASSERT_TRUE(WriteAll(fd, &response, sizeof(response)));
    ASSERT_TRUE(WriteAll(fd, first.data(), first.size() * sizeof(float)));
    first_half_sent = true;
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return send_rest; });
    }
    WriteAll(fd, rest.data(), rest.size() * sizeof(float));  // the engine may have closed it: fine
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return finish; });
    }
    close(fd);
  });

  ScopedEnv env({{"DMLC_NUM_WORKER", "1"}, {"DMLC_NUM_SERVER", "1"}, {"DMLC_WORKER_ID", "0"},
                 {"BYTEPS_FORCE_DISTRIBUTED", "1"}, {"BYTEPS_LOCAL_SIZE", "1"}, {"BYTEPS_LOCAL_RANK", "0"},
                 {"DMLC_PS_ROOT_URI", "127.0.0.1"}, {"DMLC_PS_ROOT_PORT", std::to_string(scheduler.port())},
                 {"BYTEPS_JOB_TOKEN", token}, {"BYTEPS_RENDEZVOUS_TIMEOUT", "10"}, {"BYTEPS_TIMEOUT", "1"},
                 {"BYTEPS_TCP_RCVLOWAT", "0"}});
  ProcessEngine& process = ProcessEngine::Get();
  Status st = process.Init(nullptr);
  ASSERT_TRUE(st.ok()) << st.message();
  std::shared_ptr<Engine> engine = process.engine();

  std::vector<float> input(kCount, 1.0f), output(kCount, -1.0f);
  Completion completion;
  completion.output = output.data();
  completion.count = kCount;
  TensorView t{};
  t.data = input.data();
  t.dtype = static_cast<int32_t>(DataType::kFloat32);
  t.num_elements = static_cast<int64_t>(kCount);
  t.device = -1;
  ASSERT_TRUE(engine->Submit(t, output.data(), "stalled", 0, ReduceOp::kSum, OnDone, &completion).ok());
  {
    std::unique_lock<std::mutex> lock(completion.mu);
    ASSERT_TRUE(completion.cv.wait_for(lock, std::chrono::seconds(20), [&] { return completion.done; }))
        << "the op never failed";
  }
  EXPECT_EQ(completion.code, StatusCode::kTimeout) << completion.message;
  EXPECT_TRUE(first_half_sent.load());
  {
    std::lock_guard<std::mutex> lock(mu);
    send_rest = true;
  }
  cv.notify_all();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  size_t changed = 0;
  for (size_t i = 0; i < kCount; ++i) changed += output[i] != completion.output_at_done[i];
  EXPECT_EQ(changed, 0u) << changed << " elements of the output were written after done() reported the failure";

  engine.reset();
  process.Shutdown();
  {
    std::lock_guard<std::mutex> lock(mu);
    finish = true;
  }
  cv.notify_all();
  fake_server.join();
  close(listen_fd);
}


// A failed op waits for its pushes to leave the input, but not forever: a
// server that stopped reading is cut off by the connection's liveness bound
// (TCP_USER_TIMEOUT, from BYTEPS_TIMEOUT), and done() reports the failure.
TEST(EngineCancellation, AFailedOpWithAPushStuckOnAPeerThatStoppedReadingStillCompletes) {
  const std::string token = "stuck-send-test-token";
  InProcessScheduler scheduler(token);
  int listen_fd = -1, port = 0;
  ASSERT_TRUE(ListenOn("127.0.0.1", 0, 16, &listen_fd, &port).ok());
  ASSERT_TRUE(scheduler.store().Set("server/0", "127.0.0.1:" + std::to_string(port)).ok());
  std::mutex mu;
  std::condition_variable cv;
  bool finish = false;
  std::thread silent_server([&] {
    int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    ASSERT_GE(fd, 0);
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    PeerIdentity peer;
    ASSERT_TRUE(AcceptHandshake(fd, token, 5000, &peer).ok());
    std::unique_lock<std::mutex> lock(mu);  // never reads a byte of the push
    cv.wait(lock, [&] { return finish; });
    close(fd);
  });

  ScopedEnv env({{"DMLC_NUM_WORKER", "1"}, {"DMLC_NUM_SERVER", "1"}, {"DMLC_WORKER_ID", "0"},
                 {"BYTEPS_FORCE_DISTRIBUTED", "1"}, {"BYTEPS_LOCAL_SIZE", "1"}, {"BYTEPS_LOCAL_RANK", "0"},
                 {"DMLC_PS_ROOT_URI", "127.0.0.1"}, {"DMLC_PS_ROOT_PORT", std::to_string(scheduler.port())},
                 {"BYTEPS_JOB_TOKEN", token}, {"BYTEPS_RENDEZVOUS_TIMEOUT", "10"}, {"BYTEPS_TIMEOUT", "1"},
                 {"BYTEPS_PARTITION_BYTES", std::to_string(64 << 20)}});
  ProcessEngine& process = ProcessEngine::Get();
  Status st = process.Init(nullptr);
  ASSERT_TRUE(st.ok()) << st.message();
  std::shared_ptr<Engine> engine = process.engine();
  constexpr size_t kCount = 16 << 20;  // 64 MB: far beyond what the socket buffers hold
  std::vector<float> input(kCount, 1.0f), output(kCount, 0.0f);
  Completion completion;
  completion.output = output.data();
  completion.count = 16;
  TensorView t{};
  t.data = input.data();
  t.dtype = static_cast<int32_t>(DataType::kFloat32);
  t.num_elements = static_cast<int64_t>(kCount);
  t.device = -1;
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(engine->Submit(t, output.data(), "stuck", 0, ReduceOp::kSum, OnDone, &completion).ok());
  {
    std::unique_lock<std::mutex> lock(completion.mu);
    ASSERT_TRUE(completion.cv.wait_for(lock, std::chrono::seconds(40), [&] { return completion.done; }))
        << "a failed op with a stuck push never completed";
  }
  EXPECT_NE(completion.code, StatusCode::kOk);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(40));
  engine.reset();
  process.Shutdown();
  {
    std::lock_guard<std::mutex> lock(mu);
    finish = true;
  }
  cv.notify_all();
  silent_server.join();
  close(listen_fd);
}

}  // namespace
}  // namespace bps
