// The machine's group of local ranks over the shared control segment that
// the shared-memory reducer maps (shared_memory.h): a futex doorbell per
// rank, the ranks' pids (alive, stopped or gone), the job's failure flag with
// its cause, and the order channel of device collectives. A rank joins when
// this is made (its pid published) and leaves when it is destroyed.
#pragma once
#include <chrono>
#include <memory>
#include <vector>

#include "common/config.h"
#include "local/machine_peers.h"
#include "local/shared_memory.h"

namespace bps {

class ShmMachinePeers final : public MachinePeers {
 public:
  ShmMachinePeers(std::shared_ptr<LocalSharedMemory> shm, const Config& config);
  ~ShmMachinePeers() override;

  uint32_t Doorbell() override;
  void Ring() override { shm_->Ring(); }
  void RingSelf() override { shm_->RingRank(local_rank_); }
  void WaitDoorbell(uint32_t seen, int timeout_ms) override { shm_->WaitDoorbell(local_rank_, seen, timeout_ms); }
  Status CheckPeers(bool check_alive) override;
  void FailMachine(const std::string& why) override;
  void Leave() override;
  CollectiveOrderShm* order_channel() override { return &shm_->control()->collective_order; }

 private:
  const std::shared_ptr<LocalSharedMemory> shm_;
  const int local_rank_;
  const int local_size_;
  const int machine_;
  // A local rank stopped this long while this rank waits on it fails the job:
  // half of BYTEPS_TIMEOUT, as the scheduler declares a silent member stopped.
  const double stopped_limit_seconds_;
  std::vector<std::chrono::steady_clock::time_point> stopped_since_;  // per local rank; {}: not stopped
};

}  // namespace bps
