// The engine's watchdog: an op without progress for BYTEPS_TIMEOUT fails the
// job with what it waited for; a dead local rank fails it at once.
#include "core/engine.h"

namespace bps {
namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

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
  auto now = Clock::now();
  if (now - last_peer_check_ < std::chrono::milliseconds(200)) return;
  last_peer_check_ = now;
  if (reducer_ && !failure_.failed()) {
    Status peers = reducer_->CheckPeers(/*check_alive=*/!active_.empty());
    if (!peers.ok()) SetFatal(peers);
  }
  if (LocalReducer* device = device_reducer_live_.load()) {
    Status failed = device->CheckPeers(/*check_alive=*/false);
    if (!failed.ok() && !failure_.failed()) SetFatal(failed);
  }
  for (auto& entry : active_) {
    PartitionTask* t = entry.second;
    if (t->stage == Stage::kDone || t->op->failed) continue;
    double idle = std::chrono::duration<double>(now - t->last_progress).count();
    if (idle > config_.timeout_seconds) {
      SetFatal(Status::Timeout("no progress for " + std::to_string(static_cast<int>(idle)) + " s (BYTEPS_TIMEOUT=" +
                               FormatSeconds(config_.timeout_seconds) + "): " + DescribeWait(*t)));
      break;
    }
  }
}

}  // namespace bps
