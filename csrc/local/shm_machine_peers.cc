#include "local/shm_machine_peers.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "common/process_alive.h"

namespace bps {

ShmMachinePeers::ShmMachinePeers(std::shared_ptr<LocalSharedMemory> shm, const Config& config)
    : shm_(std::move(shm)), local_rank_(config.local_rank), local_size_(config.local_size),
      machine_(config.worker_id), stopped_limit_seconds_(config.timeout_seconds / 2),
      stopped_since_(config.local_size) {
  shm_->control()->pids[local_rank_] = getpid();
}

ShmMachinePeers::~ShmMachinePeers() { Leave(); }

void ShmMachinePeers::Leave() { shm_->control()->pids[local_rank_] = 0; }

uint32_t ShmMachinePeers::Doorbell() { return shm_->control()->doorbell[local_rank_].load(); }

Status ShmMachinePeers::CheckPeers(bool check_alive) {
  ShmControl* ctl = shm_->control();
  if (ctl->job_failed.load()) return Status::PeerFailure(std::string("a local rank failed: ") + ctl->job_error);
  if (!check_alive) {
    std::fill(stopped_since_.begin(), stopped_since_.end(), std::chrono::steady_clock::time_point{});
    return Status::OK();
  }
  const auto now = std::chrono::steady_clock::now();
  for (int q = 0; q < local_size_; ++q) {
    int pid = ctl->pids[q];
    if (q == local_rank_ || pid <= 0) continue;
    auto who = [&] {
      return "local rank " + std::to_string(q) + " (worker rank " + std::to_string(machine_ * local_size_ + q) +
             ", pid " + std::to_string(pid) + ")";
    };
    if (!ProcessAlive(pid)) return Status::PeerFailure(who() + " died");
    // A stopped rank is alive to every pid check and to its sockets (its
    // kernel answers), so without this only BYTEPS_TIMEOUT would end the
    // wait, naming no one (issue 30: torch rank 0 SIGSTOPped).
    if (!ProcessStopped(pid)) {
      stopped_since_[q] = {};
      continue;
    }
    if (stopped_since_[q] == std::chrono::steady_clock::time_point{}) stopped_since_[q] = now;
    const double stopped = std::chrono::duration<double>(now - stopped_since_[q]).count();
    if (stopped >= stopped_limit_seconds_) {
      char seconds[32];
      snprintf(seconds, sizeof(seconds), "%.1f", stopped);
      return Status::PeerFailure(who() + " is stopped (SIGSTOP, or a debugger holds it): stopped for " + seconds +
                                 " s while this rank waited on it (half of BYTEPS_TIMEOUT)");
    }
  }
  return Status::OK();
}

void ShmMachinePeers::FailMachine(const std::string& why) {
  ShmControl* ctl = shm_->control();
  if (ctl->job_failed.exchange(1) == 0) snprintf(ctl->job_error, sizeof(ctl->job_error), "%s", why.c_str());
  shm_->Ring();
}

}  // namespace bps
