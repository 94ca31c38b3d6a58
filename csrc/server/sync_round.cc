#include "server/sync_round.h"

#include "common/reduce_kernels.h"

namespace bps {

void SyncRound::Add(KeyState& ks, Push& push) {
  const MessageHeader& h = push.h;
  const uint64_t started = SumStarts(h);
  if (ks.contributions == 0 && push.payload->size == push.acc_bytes) {
    // The first push of a round becomes the accumulator: its bytes landed in
    // a buffer of the right size, so adopt it instead of copying.
    ks.acc = std::move(push.payload);
  } else {
    if ((!ks.acc || ks.acc->size != push.acc_bytes) && !server_->TakeBuffer(push.acc_bytes, push, &ks.acc)) return;
    Accumulate(ks.acc->data, push.payload->data, push.count, push.dtype, ks.contributions == 0);
    push.payload.reset();  // back to the pool, warm for the next push of any key
  }
  SumEnded(h, started);
  if (!JoinRound(ks, push)) return;
  // The accumulator goes out as the answer, from one buffer that goes back
  // to the pool once written to every contributor (buffers circulate: push
  // -> sum -> answer -> any key's next push); the next round's first push
  // becomes the next accumulator. The key keeps none between rounds.
  std::shared_ptr<AlignedBuffer> wire = std::move(ks.acc);
  AnswerRound(ks, wire, h.payload_bytes);
}

}  // namespace bps
