#include "c_api/c_store.h"

#include <vector>

#include "c_api/abi_types.h"

namespace bps {

Status CStore::Set(const std::string& key, const std::string& value) {
  char err[512] = {0};
  int rc = v_.set(v_.ctx, key.c_str(), value.data(), value.size(), err, sizeof(err));
  return rc == 0 ? Status::OK() : Status(StatusCodeOf(rc), std::string("store set '") + key + "': " + err);
}

Status CStore::Get(const std::string& key, double timeout_seconds, std::string* value) {
  char err[512] = {0};
  std::vector<char> buf(4096);
  size_t len = 0;
  int64_t ms = static_cast<int64_t>(timeout_seconds * 1000);
  // A poll (timeout 0) waits 1 ms: c10d's Store::wait reads 0 ms as "no
  // timeout" and would block for good on a key that is not there.
  if (timeout_seconds >= 0 && ms == 0) ms = 1;
  int rc = v_.get(v_.ctx, key.c_str(), ms, buf.data(), buf.size(), &len, err, sizeof(err));
  if (rc == 0 && len > buf.size()) {
    buf.resize(len);
    rc = v_.get(v_.ctx, key.c_str(), ms, buf.data(), buf.size(), &len, err, sizeof(err));
  }
  if (rc != 0) return Status(StatusCodeOf(rc), std::string("store get '") + key + "': " + err);
  value->assign(buf.data(), std::min(len, buf.size()));
  return Status::OK();
}

Status CStore::Add(const std::string& key, int64_t delta, int64_t* result) {
  char err[512] = {0};
  int rc = v_.add(v_.ctx, key.c_str(), delta, result, err, sizeof(err));
  return rc == 0 ? Status::OK() : Status(StatusCodeOf(rc), std::string("store add '") + key + "': " + err);
}

}  // namespace bps
