// Status: the one error currency of the engine. No exceptions cross the data
// path; every asynchronous operation completes through one callback carrying a
// Status (tensorpipe-style).
#pragma once
#include <cstdint>
#include <string>
#include <utility>

namespace bps {

// What kind of failure a Status is. A code leaves the process as its value
// (shared memory, the scheduler's wire, the C ABI's bps_status_code, which
// c_api/abi_types.h holds to these same values), so values never change.
enum class StatusCode : int32_t {
  kOk = 0,
  kInvalidArgument = 1,  // bad call or bad environment
  kMismatch = 2,         // ranks disagree on a tensor's shape/dtype
  kPeerFailure = 3,      // a worker/server/scheduler died or broke
  kTimeout = 4,          // nothing moved within BYTEPS_TIMEOUT
  kShutdown = 5,         // engine shut down while the op was pending
  kInternal = 6,
  kNotInitialized = 7,
  kDeadlineExceeded = 8,  // an op's own deadline passed (bps_push_pull_async_with_deadline)
  kCancelled = 9,         // an op was cancelled (bps_cancel)
};

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status OK() { return Status(); }
  static Status Invalid(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }
  static Status Mismatch(std::string m) { return Status(StatusCode::kMismatch, std::move(m)); }
  static Status PeerFailure(std::string m) { return Status(StatusCode::kPeerFailure, std::move(m)); }
  static Status Timeout(std::string m) { return Status(StatusCode::kTimeout, std::move(m)); }
  static Status Shutdown(std::string m) { return Status(StatusCode::kShutdown, std::move(m)); }
  static Status Internal(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }
  static Status DeadlineExceeded(std::string m) { return Status(StatusCode::kDeadlineExceeded, std::move(m)); }
  static Status Cancelled(std::string m) { return Status(StatusCode::kCancelled, std::move(m)); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  Status WithContext(const std::string& prefix) const {
    return ok() ? *this : Status(code_, prefix + ": " + message_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

#define BPS_RETURN_IF_ERROR(expr)          \
  do {                                     \
    ::bps::Status _st = (expr);            \
    if (!_st.ok()) return _st;             \
  } while (0)

}  // namespace bps
