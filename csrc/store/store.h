// Rendezvous key-value store (gloo-style Store): set / get (waits) / add.
// Implementations: TcpStore (our scheduler), CStore (an adapter-supplied
// store such as torch's c10d TCPStore), MemoryStore (one process).
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/status.h"

namespace bps {

class Store {
 public:
  virtual ~Store() = default;
  virtual Status Set(const std::string& key, const std::string& value) = 0;
  // Waits until the key exists, up to timeout_seconds (then a Timeout status).
  virtual Status Get(const std::string& key, double timeout_seconds, std::string* value) = 0;
  virtual Status Add(const std::string& key, int64_t delta, int64_t* result) = 0;
};

// Store::Get in slices of `slice_seconds`, for waits that must say every few
// seconds what they wait for: after each slice that ended without the key,
// `still_waiting()` writes its note and returns whether to go on (false: give
// up now, returning the Timeout).
// The machines that have met so far: rendezvous publishes machine_count,
// then machine/<DMLC_WORKER_ID>, before the job's rank count is known
// (machines may differ in size). `known` is false before any worker came.
struct MachineArrivals {
  bool known = false;
  int expected = 0;
  std::vector<int> missing;  // DMLC_WORKER_IDs not yet arrived

  int arrived() const { return expected - static_cast<int>(missing.size()); }
};

inline MachineArrivals MachinesMet(Store* store) {
  MachineArrivals a;
  std::string count_text, ignored;
  if (!store->Get("machine_count", 0, &count_text).ok()) return a;
  a.known = true;
  a.expected = atoi(count_text.c_str());
  for (int m = 0; m < a.expected; ++m) {
    if (!store->Get("machine/" + std::to_string(m), 0, &ignored).ok()) a.missing.push_back(m);
  }
  return a;
}

// "1 of 2 machines arrived" while workers meet; empty before any worker came.
inline std::string MachinesArrived(Store* store) {
  const MachineArrivals a = MachinesMet(store);
  return a.known ? std::to_string(a.arrived()) + " of " + std::to_string(a.expected) + " machines arrived" : "";
}

inline Status GetInSlices(Store* store, const std::string& key, double timeout_seconds, double slice_seconds,
                          const std::function<bool()>& still_waiting, std::string* value) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  while (true) {
    const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    Status st = store->Get(key, std::max(0.0, std::min(left, slice_seconds)), value);
    if (st.code() != StatusCode::kTimeout || std::chrono::steady_clock::now() >= deadline || !still_waiting()) return st;
  }
}

// Keys of one job share a prefix so several jobs can share a store.
class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> base) : prefix_(std::move(prefix)), base_(std::move(base)) {}
  Status Set(const std::string& k, const std::string& v) override { return base_->Set(prefix_ + k, v); }
  Status Get(const std::string& k, double t, std::string* v) override { return base_->Get(prefix_ + k, t, v); }
  Status Add(const std::string& k, int64_t d, int64_t* r) override { return base_->Add(prefix_ + k, d, r); }

 private:
  std::string prefix_;
  std::shared_ptr<Store> base_;
};

}  // namespace bps
