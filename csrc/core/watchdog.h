// The engine's watchdog: when the engine thread asks the machine's reducers
// whether its peers live, and which partition has gone without progress for
// BYTEPS_TIMEOUT (the job then fails naming what it waited for: the engine's
// DescribeWait). A class of its own so that its clock and rules are in one
// place; it owns no engine state and runs on the engine thread.
#pragma once
#include <chrono>
#include <string>

#include "common/status.h"
#include "core/partition_queue.h"
#include "core/tensor_op.h"

namespace bps {

class Watchdog {
 public:
  using Clock = std::chrono::steady_clock;

  void Configure(double timeout_seconds, Clock::time_point now) {
    timeout_seconds_ = timeout_seconds;
    last_peer_check_ = now;
  }
  // True at most once per peer-check period: ask the reducers now.
  bool PeerCheckDue(Clock::time_point now);
  // The first live partition without progress for longer than the timeout
  // (null: none), and how long it waited.
  const PartitionTask* Stalled(const PartitionQueue<PartitionTask>& active, Clock::time_point now,
                               double* idle_seconds) const;
  // The job's failure for a partition stalled `idle_seconds`, waiting as `wait` says.
  Status Timeout(double idle_seconds, const std::string& wait) const;

 private:
  static constexpr std::chrono::milliseconds kPeerCheckPeriod{200};
  double timeout_seconds_ = 0;
  Clock::time_point last_peer_check_;
};

}  // namespace bps
