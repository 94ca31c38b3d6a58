#include "server/round_handler.h"

namespace bps {

bool RoundHandler::JoinRound(KeyState& ks, const Push& push) {
  ks.contributions++;
  ks.waiting.emplace_back(push.conn, push.h);
  return ks.contributions >= static_cast<int>(push.h.num_contributors);
}

void RoundHandler::AnswerRound(KeyState& ks, const std::shared_ptr<AlignedBuffer>& wire, uint64_t answer_bytes) {
  for (auto& waiter : ks.waiting) {
    MessageHeader answer = waiter.second;
    answer.type = static_cast<uint16_t>(MessageType::kResponse);
    answer.sender_rank = static_cast<uint32_t>(server_->server_id());
    answer.payload_bytes = answer_bytes;
    server_->Answer(waiter.first, answer, wire);
  }
  ks.waiting.clear();
  ks.contributions = 0;
  ks.round++;
}

uint64_t RoundHandler::SumStarts(const MessageHeader& h) {
  return server_->timeline().Tracing(h.round) ? Timeline::NowMicros() : 0;
}

void RoundHandler::SumEnded(const MessageHeader& h, uint64_t started_us) {
  if (!started_us) return;
  server_->timeline().Record("key" + std::to_string(h.key % 100000) + ".from" + std::to_string(h.sender_rank),
                             h.partition, h.round, "server_sum", started_us, Timeline::NowMicros());
}

}  // namespace bps
