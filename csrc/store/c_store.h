// Adapts a bps_store vtable from the C ABI (e.g. torch's c10d store) to Store.
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
