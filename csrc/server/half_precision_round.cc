#include "server/half_precision_round.h"

#include "common/reduce_kernels.h"

namespace bps {

void HalfPrecisionRound::Add(KeyState& ks, Push& push) {
  const MessageHeader& h = push.h;
  const uint64_t started = SumStarts(h);
  // The push is half the accumulator's size: never adopted as it.
  if ((!ks.acc || ks.acc->size != push.acc_bytes) && !server_->TakeBuffer(push.acc_bytes, push, &ks.acc)) return;
  Accumulate(ks.acc->data, push.payload->data, push.count, push.dtype, ks.contributions == 0);
  push.payload.reset();  // back to the pool, warm for the next push of any key
  SumEnded(h, started);
  if (!JoinRound(ks, push)) return;
  std::shared_ptr<AlignedBuffer> wire;
  if (!server_->TakeBuffer(h.payload_bytes, push, &wire)) return;
  AccumulatorToWire(wire->data, ks.acc->data, push.count, push.dtype);
  ks.acc.reset();
  AnswerRound(ks, wire, h.payload_bytes);
}

}  // namespace bps
