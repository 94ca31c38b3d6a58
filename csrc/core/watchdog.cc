// The engine's watchdog: an op without progress for BYTEPS_TIMEOUT fails the
// job with what it waited for; a dead local rank fails it at once.
#include "core/watchdog.h"

#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/engine.h"

namespace bps {
namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

// A dead child stays a zombie until its launcher reaps it (torchrun may take
// seconds): kill(pid, 0) still succeeds then, so read its state too.
bool ProcessAlive(int pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = fopen(path, "r");
  if (!f) return true;  // no procfs: trust kill()
  char buf[512] = {0};
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  const char* close_paren = strrchr(buf, ')');  // comm may contain spaces
  if (n == 0 || !close_paren || close_paren[1] == '\0') return true;
  const char state = close_paren[2];
  return state != 'Z' && state != 'X';
}

std::string Engine::DescribeWait(const PartitionTask& t) {
  std::string what = "tensor '" + t.op->name + "' partition " + std::to_string(t.index) + " round " +
                     std::to_string(t.round) + " ";
  switch (t.stage) {
    case Stage::kWaitTurn: return what + "waited for its previous round";
    case Stage::kStage: return what + "waited for local ranks to finish the previous round";
    case Stage::kReduce:
      return what + "waited for local ranks to submit it (" +
             (reducer_ ? reducer_->DescribeStaging(t.entry, t.round) : std::string("?")) + ")";
    case Stage::kPush: return what + "waited for a scheduling credit";
    case Stage::kAwait:
      return what + "waited for server " + std::to_string(t.server) + " (" + server_addresses_[t.server] +
             ") to answer: other machines have not pushed it";
    case Stage::kGather: return what + "waited for other local ranks' slices";
    default: return what;
  }
}

void Engine::CheckTimeoutsAndPeers() {
  auto now = Clock::now();
  if (now - last_peer_check_ < std::chrono::milliseconds(200)) return;
  last_peer_check_ = now;
  if (reducer_ && !has_fatal_) {
    Status peers = reducer_->CheckPeers(/*check_alive=*/!active_.empty());
    if (!peers.ok()) SetFatal(peers);
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
