// The transport alone (issue 14, benchmark 4): one sending and one receiving
// Transport in this process over loopback (or any address), message sizes
// 4 KB to 64 MB, 1 to 8 connections, each connection keeping a window of
// messages in flight, every payload received in place into a posted buffer.
// Prints GB/s of payload per (size, connections), so the transport's ceiling
// on a host is known apart from the engine. Built and run by
// benchmarks/transport_bench.sh.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ps/protocol.h"
#include "transport/transport.h"

namespace bps {
namespace transport {
namespace {

constexpr char kToken[] = "transport-bench-token";

struct Flow {
  std::shared_ptr<Connection> sender, receiver;
  std::vector<std::vector<char>> slots;  // one receive buffer per window slot
  std::vector<char> payload;
};

// Sends `messages` messages of `bytes` on every flow, `window` in flight each.
// The run's state is shared with the callbacks, which may outlive the call.
struct Run {
  std::mutex mu;
  std::condition_variable cv;
  int flows_done = 0;
  bool failed = false;
  std::string why;
  std::vector<std::unique_ptr<std::atomic<int>>> next, completed;
};

void Start(const std::shared_ptr<Run>& run, std::vector<Flow>* flows, size_t f, int n, uint64_t bytes, int messages,
           int window) {
  Flow& flow = (*flows)[f];
  const uint64_t key = (uint64_t(f) << 32) | uint32_t(n);
  char* dst = flow.slots[n % window].data();
  flow.receiver->PostReceive(key, 0, dst, bytes, [run, flows, f, bytes, messages, window](const Status& st) {
    if (!st.ok()) {
      fprintf(stderr, "receive of flow %zu failed: %s (completed %d)\n", f, st.message().c_str(), run->completed[f]->load());
      std::lock_guard<std::mutex> lock(run->mu);
      if (!run->failed) run->why = st.message();
      run->failed = true;
      run->cv.notify_all();
      return;
    }
    const int done = ++*run->completed[f];
    const int n2 = (*run->next[f])++;
    if (n2 < messages) Start(run, flows, f, n2, bytes, messages, window);
    if (done == messages) {
      std::lock_guard<std::mutex> lock(run->mu);
      ++run->flows_done;
      run->cv.notify_all();
    }
  });
  MessageHeader h;
  h.type = static_cast<uint16_t>(MessageType::kResponse);
  h.key = key;
  h.dtype = static_cast<uint8_t>(DataType::kUInt8);
  h.payload_bytes = bytes;
  flow.sender->Send(ToFrame(h), flow.payload.data(), [](const Status&) {});
}

double RunOnce(std::vector<Flow>& flows, uint64_t bytes, int messages, int window) {
  auto run = std::make_shared<Run>();
  for (size_t i = 0; i < flows.size(); ++i) {
    run->next.emplace_back(new std::atomic<int>(0));
    run->completed.emplace_back(new std::atomic<int>(0));
  }
  auto t0 = std::chrono::steady_clock::now();
  for (size_t f = 0; f < flows.size(); ++f) {
    for (int w = 0; w < std::min(window, messages); ++w) Start(run, &flows, f, (*run->next[f])++, bytes, messages, window);
  }
  std::unique_lock<std::mutex> lock(run->mu);
  run->cv.wait(lock, [&] { return run->failed || run->flows_done == static_cast<int>(flows.size()); });
  if (run->failed) {
    fprintf(stderr, "a receive failed: %s\n", run->why.c_str());
    exit(1);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return double(bytes) * messages * flows.size() / seconds / 1e9;
}

int Main(int argc, char** argv) {
  std::string host = argc > 1 ? argv[1] : "127.0.0.1";
  const uint64_t sizes[] = {4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
  const int connection_counts[] = {1, 2, 4, 8};
  const double budget_bytes = argc > 2 ? atof(argv[2]) : 2e9;  // payload per point
  printf("transport tcp over %s: GB/s of payload, window 4 messages per connection, %d cores\n", host.c_str(),
         static_cast<int>(std::thread::hardware_concurrency()));
  printf("%10s", "size");
  for (int c : connection_counts) printf("  %5d conn", c);
  printf("\n");
  for (uint64_t bytes : sizes) {
    printf("%8llu KB", static_cast<unsigned long long>(bytes >> 10));
    for (int c : connection_counts) {
      TransportOptions options;
      options.auth.token = kToken;
      options.io_threads = c;  // one I/O thread per connection on each side
      std::unique_ptr<Transport> senders, receivers;
      if (!CreateTransport("tcp", options, &senders).ok() || !CreateTransport("tcp", options, &receivers).ok()) return 1;
      std::unique_ptr<Listener> listener;
      Status st = receivers->Listen(host, 0, &listener);
      if (!st.ok()) {
        fprintf(stderr, "%s\n", st.message().c_str());
        return 1;
      }
      std::vector<Flow> flows(c);
      for (int i = 0; i < c; ++i) {
        Handlers handlers;
        handlers.frames = &PsFrameRules();  // the engine's frames
        std::thread accept([&] { listener->Accept(10, handlers, &flows[i].receiver); });
        st = senders->Connect(listener->address(), "receiver", 10, handlers, &flows[i].sender);
        accept.join();
        if (!st.ok() || !flows[i].receiver) {
          fprintf(stderr, "connect failed: %s\n", st.message().c_str());
          return 1;
        }
        flows[i].slots.assign(4, std::vector<char>(bytes, 0));
        flows[i].payload.assign(bytes, 1);
      }
      const int messages = std::max(8, static_cast<int>(budget_bytes / c / bytes));
      RunOnce(flows, bytes, std::max(4, messages / 8), 4);  // warm-up
      printf("  %10.2f", RunOnce(flows, bytes, messages, 4));
      fflush(stdout);
      for (auto& f : flows) {
        f.sender->Close(Status::Shutdown("done"));
        f.receiver->Close(Status::Shutdown("done"));
      }
      flows.clear();
    }
    printf("\n");
  }
  return 0;
}

}  // namespace
}  // namespace transport
}  // namespace bps

int main(int argc, char** argv) { return bps::transport::Main(argc, argv); }
