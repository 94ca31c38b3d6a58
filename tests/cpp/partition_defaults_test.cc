// The partition sizes a configuration derives from the environment (issue
// 38): through servers host and device tensors are cut differently unless
// BYTEPS_PARTITION_BYTES says otherwise; a server accepts the larger; and the
// credit window keeps as many partitions of either kind on the link.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "common/config.h"
#include "core/credit_window.h"

namespace bps {
namespace {

// Sets the variables for one test and restores what was there.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::map<std::string, std::string>& vars) {
    for (const char* name : {"DMLC_ROLE", "DMLC_NUM_WORKER", "DMLC_NUM_SERVER", "BYTEPS_PARTITION_BYTES",
                             "BYTEPS_FORCE_DISTRIBUTED", "BYTEPS_LOCAL_SIZE", "BYTEPS_LOCAL_RANK", "DMLC_WORKER_ID"}) {
      const char* old = getenv(name);
      if (old) saved_[name] = old;
      unsetenv(name);
    }
    for (auto& kv : vars) setenv(kv.first.c_str(), kv.second.c_str(), 1);
  }
  ~ScopedEnv() {
    for (const char* name : {"DMLC_ROLE", "DMLC_NUM_WORKER", "DMLC_NUM_SERVER", "BYTEPS_PARTITION_BYTES",
                             "BYTEPS_FORCE_DISTRIBUTED", "BYTEPS_LOCAL_SIZE", "BYTEPS_LOCAL_RANK", "DMLC_WORKER_ID"}) {
      unsetenv(name);
    }
    for (auto& kv : saved_) setenv(kv.first.c_str(), kv.second.c_str(), 1);
  }

 private:
  std::map<std::string, std::string> saved_;
};

Config Parse(const std::map<std::string, std::string>& vars) {
  ScopedEnv env(vars);
  Config c;
  Status st = ConfigFromEnvironment(false, &c);
  EXPECT_TRUE(st.ok()) << st.message();
  return c;
}

TEST(PartitionDefaults, ThroughServersHostAndDeviceTensorsAreCutDifferently) {
  const Config worker = Parse({{"DMLC_NUM_WORKER", "2"}, {"DMLC_NUM_SERVER", "2"}});
  EXPECT_EQ(worker.PartitionBytesFor(false), Config::kNetworkPartitionBytes);
  EXPECT_EQ(worker.PartitionBytesFor(true), Config::kNetworkDevicePartitionBytes);
  EXPECT_LT(worker.PartitionBytesFor(false), worker.PartitionBytesFor(true));
  EXPECT_EQ(worker.LargestPartitionBytes(), Config::kNetworkDevicePartitionBytes);
  // A server takes pushes of the larger kind, and a forced-distributed
  // single machine pushes as a job of several does.
  const Config server = Parse({{"DMLC_ROLE", "server"}, {"DMLC_NUM_WORKER", "2"}, {"DMLC_NUM_SERVER", "2"}});
  EXPECT_EQ(server.LargestPartitionBytes(), worker.LargestPartitionBytes());
  EXPECT_EQ(server.PartitionBytesFor(false), worker.PartitionBytesFor(false));
  const Config forced = Parse({{"BYTEPS_FORCE_DISTRIBUTED", "1"}, {"DMLC_NUM_SERVER", "1"}});
  EXPECT_EQ(forced.PartitionBytesFor(false), worker.PartitionBytesFor(false));
  EXPECT_EQ(forced.PartitionBytesFor(true), worker.PartitionBytesFor(true));
}

TEST(PartitionDefaults, OneMachineCutsBothKindsAlike) {
  const Config c = Parse({{"BYTEPS_LOCAL_SIZE", "2"}});
  EXPECT_EQ(c.PartitionBytesFor(false), Config::kLocalPartitionBytes);
  EXPECT_EQ(c.PartitionBytesFor(true), Config::kLocalPartitionBytes);
}

TEST(PartitionDefaults, ASetSizeCutsBothKindsRoundedTo64Bytes) {
  const Config c = Parse({{"DMLC_NUM_WORKER", "2"}, {"DMLC_NUM_SERVER", "1"}, {"BYTEPS_PARTITION_BYTES", "300000"}});
  EXPECT_EQ(c.PartitionBytesFor(false), 300032);
  EXPECT_EQ(c.PartitionBytesFor(true), 300032);
  EXPECT_EQ(c.LargestPartitionBytes(), 300032);
  // A configuration built by hand (the in-process tests) cuts device tensors
  // at its one size too.
  Config by_hand;
  by_hand.partition_bytes = 4096;
  EXPECT_EQ(by_hand.PartitionBytesFor(true), 4096);
}

TEST(PartitionDefaults, TheWindowHoldsAsManyPartitionsOfEitherKind) {
  // The engine sizes the window in host partitions (engine.cc) and charges
  // each push Config::CreditCharge (stage_pipeline.cc).
  const Config c = Parse({{"DMLC_NUM_WORKER", "2"}, {"DMLC_NUM_SERVER", "1"}});
  for (bool on_device : {false, true}) {
    CreditWindow window(static_cast<uint64_t>(c.scheduling_credit) * static_cast<uint64_t>(c.partition_bytes), 1);
    const uint64_t partition = static_cast<uint64_t>(c.PartitionBytesFor(on_device));
    window.BeginPass();
    int admitted = 0;
    while (admitted < 100 && window.TryAdmit(0, c.CreditCharge(partition, on_device))) ++admitted;
    EXPECT_EQ(admitted, c.scheduling_credit) << (on_device ? "device" : "host");
  }
  // Compressed and last partitions are smaller: charged by their bytes.
  EXPECT_EQ(c.CreditCharge(c.PartitionBytesFor(true) / 2, true), static_cast<uint64_t>(c.partition_bytes) / 2);
  EXPECT_EQ(c.CreditCharge(1000, false), 1000u);
}

}  // namespace
}  // namespace bps
