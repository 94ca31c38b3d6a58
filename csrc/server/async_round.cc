#include "server/async_round.h"

#include "common/reduce_kernels.h"

namespace bps {

void AsyncRound::Add(KeyState& ks, Push& push) {
  const MessageHeader& h = push.h;
  bool starts_sum = push.opens_key;
  if (!ks.acc || ks.acc->size != push.acc_bytes) {
    if (!server_->TakeBuffer(push.acc_bytes, push, &ks.acc)) return;
    starts_sum = true;  // a new running sum starts from this push
  }
  Accumulate(ks.acc->data, push.payload->data, push.count, push.dtype, starts_sum);
  push.payload.reset();
  ks.contributions = 1;
  std::shared_ptr<AlignedBuffer> snapshot;
  if (!server_->TakeBuffer(h.payload_bytes, push, &snapshot)) return;
  AccumulatorToWire(snapshot->data, ks.acc->data, push.count, push.dtype);
  MessageHeader answer = h;
  answer.type = static_cast<uint16_t>(MessageType::kResponse);
  server_->Answer(push.conn, answer, snapshot);
}

}  // namespace bps
