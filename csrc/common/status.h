// Status: the one error currency of the engine. No exceptions cross the data
// path; every asynchronous operation completes through one callback carrying a
// Status (tensorpipe-style).
#pragma once
#include <string>
#include <utility>

#include "c_api/byteps_c.h"

namespace bps {

class Status {
 public:
  Status() = default;
  Status(int code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status OK() { return Status(); }
  static Status Invalid(std::string m) { return Status(BPS_INVALID_ARGUMENT, std::move(m)); }
  static Status Mismatch(std::string m) { return Status(BPS_MISMATCH, std::move(m)); }
  static Status PeerFailure(std::string m) { return Status(BPS_PEER_FAILURE, std::move(m)); }
  static Status Timeout(std::string m) { return Status(BPS_TIMEOUT, std::move(m)); }
  static Status Shutdown(std::string m) { return Status(BPS_SHUTDOWN, std::move(m)); }
  static Status Internal(std::string m) { return Status(BPS_INTERNAL, std::move(m)); }

  bool ok() const { return code_ == BPS_OK; }
  int code() const { return code_; }
  const std::string& message() const { return message_; }
  Status WithContext(const std::string& prefix) const {
    return ok() ? *this : Status(code_, prefix + ": " + message_);
  }

 private:
  int code_ = BPS_OK;
  std::string message_;
};

#define BPS_RETURN_IF_ERROR(expr)          \
  do {                                     \
    ::bps::Status _st = (expr);            \
    if (!_st.ok()) return _st;             \
  } while (0)

}  // namespace bps
