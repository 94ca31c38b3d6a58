// The engine's watchdog: an op without progress for BYTEPS_TIMEOUT fails the
// job with what it waited for; a dead local rank fails it at once.
#include "core/watchdog.h"

#include "common/config.h"
#include "core/engine.h"

namespace bps {
namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

bool Watchdog::PeerCheckDue(Clock::time_point now) {
  if (now - last_peer_check_ < kPeerCheckPeriod) return false;
  last_peer_check_ = now;
  return true;
}

const PartitionTask* Watchdog::Stalled(const PartitionQueue<PartitionTask>& active, Clock::time_point now,
                                       double* idle_seconds) const {
  for (const auto& entry : active) {
    const PartitionTask* t = entry.second;
    if (t->stage == Stage::kDone || t->op->failed) continue;
    const double idle = std::chrono::duration<double>(now - t->last_progress).count();
    if (idle > timeout_seconds_) {
      *idle_seconds = idle;
      return t;
    }
  }
  return nullptr;
}

Status Watchdog::Timeout(double idle_seconds, const std::string& wait) const {
  return Status::Timeout("no progress for " + std::to_string(static_cast<int>(idle_seconds)) + " s (BYTEPS_TIMEOUT=" +
                         FormatSeconds(timeout_seconds_) + "): " + wait);
}

std::string Engine::DescribeWait(const PartitionTask& t) {
  std::string what = "tensor '" + t.op->name + "' partition " + std::to_string(t.index) + " round " +
                     std::to_string(t.round) + " ";
  switch (t.stage) {
    case Stage::kWaitTurn: {
      if (reducer_ && rounds_.IsTurnOf(t.local_key, t.round)) {
        return what + "waited for a free entry of the shared-memory key table (all " +
               std::to_string(config_.local_key_table_size) +
               " of BYTEPS_LOCAL_KEY_TABLE_SIZE are held by partitions in flight; raise it on every rank)";
      }
      return what + "waited for its previous round";
    }
    case Stage::kStage: return what + "waited for local ranks to finish the previous round";
    case Stage::kReduce:
      return what + "waited for local ranks to submit it (" +
             (t.op->reducer ? t.op->reducer->DescribeStaging(t.entry, t.round) : std::string("?")) + ")";
    case Stage::kPush: return what + "waited for a scheduling credit";
    case Stage::kAwait: {
      int server = -1;  // the first push still unanswered
      for (const auto& push : t.pushes) {
        if (push.pull && push.pull->state.load(std::memory_order_acquire) == 0) {
          server = push.server;
          break;
        }
      }
      return what + "waited for server " + std::to_string(server) + " (" + servers_->address(server) +
             ") to answer: other machines have not pushed it";
    }
    case Stage::kGather:
      if (t.op->device >= 0) {
        return what + "waited for its device all-gather (" +
               (t.op->reducer ? t.op->reducer->DescribeStaging(t.entry, t.round) : std::string("?")) + ")";
      }
      return what + "waited for other local ranks' slices";
    default: return what;
  }
}

void Engine::CheckTimeoutsAndPeers() {
  const auto now = Clock::now();
  if (!watchdog_.PeerCheckDue(now)) return;
  if (peers_ && !failure_.failed()) {
    Status peers = peers_->CheckPeers(/*check_alive=*/!active_.empty());
    if (!peers.ok()) SetFatal(peers);
  }
  if (PeerLiveness* device = device_liveness_live_.load()) {
    Status failed = device->CheckPeers(/*check_alive=*/false);
    if (!failed.ok() && !failure_.failed()) SetFatal(failed);
  }
  double idle = 0;
  if (const PartitionTask* stalled = watchdog_.Stalled(active_, now, &idle)) {
    SetFatal(watchdog_.Timeout(idle, DescribeWait(*stalled)));
  }
}

}  // namespace bps
