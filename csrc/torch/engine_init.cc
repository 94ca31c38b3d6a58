#include "torch/engine_init.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "c_api/byteps_c.h"
#include "torch/callback_pool.h"
#include "torch/completion_queue.h"
#include "torch/push_pull.h"

namespace byteps_torch {
namespace {

void WriteError(char* err, size_t cap, const std::string& text) {
  if (err == nullptr || cap == 0) return;
  size_t n = std::min(cap - 1, text.size());
  std::memcpy(err, text.data(), n);
  err[n] = '\0';
}

// A bounded wait as a loop of check(): TCPStore logs two warnings
// ("waitForInput: poll ... returned 0, likely a timeout") each time a wait()
// expires, and the engine polls keys that may not be there yet (a poll is a
// 1 ms wait, c_api/c_store.cc), so a plain job printed warnings nobody must
// act on (issue 27). check() answers at once and logs nothing.
bool AppearsWithin(c10d::Store& store, const std::string& key, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::microseconds(500);
  while (!store.check({key})) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
  return true;
}

// The bps_store vtable over a c10d::Store. Exceptions never cross the C ABI.
struct StoreBridge {
  c10::intrusive_ptr<c10d::Store> store;
  bps_store vtable{};

  explicit StoreBridge(c10::intrusive_ptr<c10d::Store> s) : store(std::move(s)) {
    vtable.ctx = this;
    vtable.set = &Set;
    vtable.get = &Get;
    vtable.add = &Add;
  }

  static StoreBridge* Self(void* ctx) { return static_cast<StoreBridge*>(ctx); }

  static int Set(void* ctx, const char* key, const void* value, size_t len, char* err,
                 size_t err_cap) {
    try {
      const auto* bytes = static_cast<const uint8_t*>(value);
      Self(ctx)->store->set(key, std::vector<uint8_t>(bytes, bytes + len));
      return BPS_OK;
    } catch (const std::exception& e) {
      WriteError(err, err_cap, std::string("c10d store set('") + key + "') failed: " + e.what());
      return BPS_PEER_FAILURE;
    }
  }

  static int Get(void* ctx, const char* key, int64_t timeout_ms, void* buf, size_t cap,
                 size_t* len, char* err, size_t err_cap) {
    auto& store = Self(ctx)->store;
    try {
      if (timeout_ms < 0) {
        store->wait({key});
      } else if (!AppearsWithin(*store, key, std::chrono::milliseconds(timeout_ms))) {
        WriteError(err, err_cap, std::string("c10d store: key '") + key + "' did not appear within " +
                                     std::to_string(timeout_ms) + " ms");
        return BPS_TIMEOUT;
      }
    } catch (const c10::DistStoreError& e) {
      // TCPStore reports an expired wait as a DistStoreError.
      WriteError(err, err_cap, std::string("c10d store: key '") + key + "' did not appear within " +
                                   std::to_string(timeout_ms) + " ms: " + e.what());
      return BPS_TIMEOUT;
    } catch (const std::exception& e) {
      WriteError(err, err_cap, std::string("c10d store wait('") + key + "') failed: " + e.what());
      return BPS_PEER_FAILURE;
    }
    try {
      std::vector<uint8_t> value = store->get(key);
      *len = value.size();
      std::memcpy(buf, value.data(), std::min(cap, value.size()));
      return BPS_OK;
    } catch (const std::exception& e) {
      WriteError(err, err_cap, std::string("c10d store get('") + key + "') failed: " + e.what());
      return BPS_PEER_FAILURE;
    }
  }

  static int Add(void* ctx, const char* key, int64_t delta, int64_t* result, char* err,
                 size_t err_cap) {
    try {
      *result = Self(ctx)->store->add(key, delta);
      return BPS_OK;
    } catch (const std::exception& e) {
      WriteError(err, err_cap, std::string("c10d store add('") + key + "') failed: " + e.what());
      return BPS_PEER_FAILURE;
    }
  }
};

int EnvInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  long parsed = std::strtol(value, &end, 10);
  TORCH_CHECK(end != value && *end == '\0' && parsed >= 0, "environment variable ", name, "='",
              value, "' is not a non-negative integer; unset it or fix the launcher");
  return static_cast<int>(parsed);
}

std::mutex init_mutex;

void CheckSameTopology(const Topology& wanted) {
  TORCH_CHECK(bps_rank() == wanted.rank && bps_size() == wanted.size,
              "byteps engine already runs as rank ", bps_rank(), " of ", bps_size(),
              " but a process group asks for rank ", wanted.rank, " of ", wanted.size,
              "; the byteps backend serves only the world group (one engine per process). "
              "Create sub-groups with backend='gloo'.");
}

}  // namespace

Topology TopologyFromTorchrunEnv(int rank, int size) {
  Topology topology{rank, size, EnvInt("LOCAL_RANK", -1), EnvInt("LOCAL_WORLD_SIZE", -1)};
  if (topology.local_rank < 0 || topology.local_size <= 0) {
    topology.local_rank = rank;
    topology.local_size = size;
  }
  // Machines may run different numbers of processes (issue 29): the engine
  // takes the machine's index from torchrun's GROUP_RANK / GROUP_WORLD_SIZE.
  TORCH_CHECK(topology.local_rank < topology.local_size && topology.local_size <= size,
              "inconsistent topology: LOCAL_RANK=", topology.local_rank, " LOCAL_WORLD_SIZE=",
              topology.local_size, " for rank ", rank, " of ", size);
  return topology;
}

// The threads that complete every operation (completion_queue.h,
// callback_pool.h) start with the engine, not inside the first collective:
// a job's first call then costs what a later one does (issue 27).
static void StartCompletionThreads() {
  CompletionQueue::Instance();
  CallbackPool::Instance().Prestart();
}

void InitEngineWithStore(const c10::intrusive_ptr<c10d::Store>& store, const Topology& topology) {
  std::lock_guard<std::mutex> lock(init_mutex);
  if (bps_initialized()) {
    CheckSameTopology(topology);
    return;
  }
  c10::intrusive_ptr<c10d::Store> engine_store = store;
  try {
    // A separate client connection, so the engine's control traffic never
    // queues behind torch's own store calls.
    engine_store = store->clone();
  } catch (const std::exception&) {
    engine_store = store;  // stores without clone() (e.g. HashStore) are shared
  }
  // Leaked on purpose: the engine may use the store until process exit.
  auto* bridge = new StoreBridge(engine_store);
  bps_init_options options{};
  options.struct_size = sizeof(bps_init_options);
  options.rank = topology.rank;
  options.size = topology.size;
  options.local_rank = topology.local_rank;
  options.local_size = topology.local_size;
  options.store = &bridge->vtable;
  int rc = bps_init(&options);
  if (rc != BPS_OK) {
    const char* why = bps_last_error();
    TORCH_CHECK(false, "byteps engine failed to start as rank ", topology.rank, " of ",
                topology.size, " (", StatusName(rc), "): ", (why && *why) ? why : "no detail");
  }
  StartCompletionThreads();
}

void InitEngineFromEnv() {
  std::lock_guard<std::mutex> lock(init_mutex);
  if (bps_initialized()) return;
  int rc = bps_init(nullptr);
  if (rc != BPS_OK) {
    const char* why = bps_last_error();
    TORCH_CHECK(false, "byteps engine failed to start from the DMLC_*/BYTEPS_* environment (",
                StatusName(rc), "): ", (why && *why) ? why : "no detail",
                ". Launch with bpslaunch, or use torchrun.");
  }
  StartCompletionThreads();
}

}  // namespace byteps_torch
