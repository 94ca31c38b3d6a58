// Adapts a bps_store vtable from the C ABI (e.g. torch's c10d store) to Store.
// Here, not in csrc/store: it is the C ABI's type, and nothing below c_api/
// sees byteps_c.h.
#pragma once
#include "c_api/byteps_c.h"
#include "store/store.h"

namespace bps {

class CStore : public Store {
 public:
  explicit CStore(bps_store vtable) : v_(vtable) {}
  Status Set(const std::string& key, const std::string& value) override;
  Status Get(const std::string& key, double timeout_seconds, std::string* value) override;
  Status Add(const std::string& key, int64_t delta, int64_t* result) override;

 private:
  bps_store v_;
};

}  // namespace bps
