// What happens to an op that fails: its partitions cancel their I/O, close
// their rounds with the local reducer (so the other local ranks fail that
// round too) and wait until no byte can move in their buffers; then done()
// reports the cause. A failure of the round itself (a mismatch, a passed
// deadline, a cancel) also moves the name to fresh keys and tells the other
// machines. A fatal failure latches the whole rank.
#include "common/hashing.h"
#include "common/logging.h"
#include "core/engine.h"

namespace bps {

void Engine::Fail(const Status& why) { SetFatal(why); }

void Engine::SetFatal(const Status& st) {
  if (!failure_.Set(st)) return;
  BPS_LOG(Error) << st.message();
  // Called from other threads too (the scheduler's abort watcher): the
  // failure latched above may complete every op, and the caller shut down,
  // before this thread gets here. ReleaseResources frees the reducers under
  // the same lock (issue 30: a worker's SIGSEGV at exit after a failed first
  // push_pull, the watcher ringing a freed reducer).
  std::lock_guard<std::mutex> lock(reducers_mu_);
  if (peers_) peers_->FailMachine(st.message());
  // No rank stays inside a device collective whose peers will not issue it.
  if (PeerLiveness* device = device_liveness_live_.load()) device->FailMachine(st.message());
  Ring();
}

void Engine::FailOp(TensorOp* op, const Status& st) {
  if (op->failed || op->remaining == 0) return;
  op->failed = true;
  std::string msg = st.message();
  if (msg.find("'" + op->name + "'") == std::string::npos) msg = "push_pull of '" + op->name + "' failed: " + msg;
  op->failure = Status(st.code(), msg);
  if (AbandonsRound(st.code())) OnRoundAbandoned(op);
  // Its caller completed at once and moved on: only the latch can tell it
  // (its next call fails with this cause). A shutdown is no failure.
  if (op->caller_moved_on && st.code() != StatusCode::kShutdown) SetFatal(op->failure);
  op->unretired = 0;
  for (auto& t : op->parts) op->unretired += t->stage != Stage::kDone;
  // Cancel every pull of the op: its receive's callback (which releases it)
  // runs only once nothing more can land in its buffer. done() waits for it.
  for (auto& t : op->parts) {
    for (auto& push : t->pushes) {
      if (push.pull) push.pull->Cancel(push.key);
    }
  }
}

bool Engine::AbandonsRound(StatusCode code) {
  return code == StatusCode::kMismatch || code == StatusCode::kDeadlineExceeded || code == StatusCode::kCancelled;
}

void Engine::OnRoundAbandoned(TensorOp* op) {
  // Every rank's op of this round fails with the same cause (the servers and
  // shared memory tell them all), so every rank moves to the same generation.
  rounds_.MoveToFreshKeys(HashName(op->name));
  if (op->mismatch_from_server) return;  // the server already told everyone
  // Tell the other machines through every server: ranks that wait there for
  // this round fail now, naming it, instead of timing out.
  if (servers_) servers_->RelayTensorError(op->name_hash, op->name_op, op->failure);
}

void Engine::FailRequested(const FailRequest& request) {
  TensorOp* op = nullptr;
  for (auto& o : ops_) {
    if (o->seq == request.seq) op = o.get();
  }
  // Completed (or failed) before the request arrived: its done() said so.
  if (!op || op->failed || op->remaining == 0 || !op->done) return;
  const std::string on_rank = " on rank " + std::to_string(rank());
  std::string text;
  if (request.code == StatusCode::kDeadlineExceeded) {
    const PartitionTask* waiting = nullptr;
    for (auto& t : op->parts) {
      if (t->stage != Stage::kDone) {
        waiting = t.get();
        break;
      }
    }
    text = "push_pull of '" + op->name + "' passed its deadline of " + FormatSeconds(op->deadline_seconds) + " s" +
           on_rank + (waiting ? ": " + DescribeWait(*waiting) : std::string());
  } else {
    text = "push_pull of '" + op->name + "' was cancelled" + on_rank + ": " + request.why;
  }
  if (op->fused) {
    // One machine's device collective is issued at submission and its peers
    // run it with this rank's buffers: nothing of it can be taken back.
    SetFatal(Status(request.code, text + " (its device collective was already issued on this machine, so it cannot "
                                         "be taken back: the job fails)"));
    return;
  }
  FailOp(op, Status(request.code, text));
}

void Engine::FailTensorsReportedByServers() {
  if (!servers_) return;
  for (auto& error : servers_->TakeTensorErrors()) {
    for (auto& op : ops_) {
      // Earlier ops of the name completed on the servers; only a slower
      // machine still finishes them (issue 20 item 5: a size change that one
      // machine's ranks disagreed on failed the op before it on the other).
      if (op->failed || op->name_hash != error.name_hash || op->name_op < error.first_op) continue;
      op->mismatch_from_server = true;
      FailOp(op.get(), Status(error.code, "tensor '" + op->name + "' (" + DataTypeName(op->dtype) + " " + op->shape +
                                              " on rank " + std::to_string(rank()) + "): " + error.why));
    }
  }
}

bool Engine::RetireFailed(PartitionTask& t) {
  if (t.io->in_flight.load(std::memory_order_acquire) != 0) return false;
  TensorOp* op = t.op;
  LocalReducer* R = op->reducer;
  if (op->fused) {
    // Its collective runs to the end (or the abort) before the buffers go back.
    if (!R->Settled(t.entry, t.round)) return false;
    R->ReleasePartition(t.entry);
    t.entry = nullptr;
    t.stage = Stage::kDone;
    op->unretired--;
    return true;
  }
  if (!rounds_.IsTurnOf(t.local_key, t.round)) return false;  // an earlier round of this name is still open
  if (R) {
    if (!t.closed_round) {
      R->CloseFailedRound(t.entry, t.local_key, t.range.count * DataTypeSize(op->dtype), op->dtype, t.round,
                          op->failure, t.staged);
      t.closed_round = true;
    }
    // Device collectives of the round already issued (or still to be
    // decided) finish first: nobody writes into the buffers after done().
    if (!R->Settled(t.entry, t.round)) return false;
    if (t.entry) R->ReleasePartition(t.entry);
    t.entry = nullptr;
  }
  rounds_.Close(t.local_key, t.round);
  t.stage = Stage::kDone;
  op->unretired--;
  return true;
}

void Engine::CompleteFailedOp(TensorOp* op) {
  stats_.queue_depth--;
  if (op->ready_event) op->reducer->ReturnReady(op->ready_event);
  op->ready_event = nullptr;
  // After every partition settled: nothing writes the output any more.
  ReleaseResultHold(op);
  if (op->deadline_alarm) alarms_.Cancel(op->deadline_alarm);
  DoneCallback done = op->done;
  op->done = nullptr;  // marks the op complete
  done(op->user_data, static_cast<int>(op->failure.code()), op->failure.message().c_str());
}

void Engine::ReleaseResultHold(TensorOp* op) {
  if (!op->result_hold) return;
  op->reducer->ReleaseHold(op->result_hold);
  op->result_hold = nullptr;
}

}  // namespace bps
