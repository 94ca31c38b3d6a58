#include "server/round_mismatch.h"

namespace bps {

std::string RoundMismatch(const KeyState& ks, const Push& push, const ServerTerms& terms) {
  const MessageHeader& h = push.h;
  const MessageHeader* first = ks.waiting.empty() ? nullptr : &ks.waiting.front().second;
  std::string mismatch = CheckPushTerms(h, first, terms);
  if (mismatch.empty() && push.compressed && first) {
    mismatch = CheckCodecTerms(h, push.codec, PayloadCuts(push.payload->data), *first, ks.codec, ks.cuts.data());
  }
  if (mismatch.empty() && terms.async && !push.opens_key &&
      (h.signature != ks.signature || h.payload_bytes != ks.payload_bytes || push.dtype != ks.dtype)) {
    mismatch = "ranks disagree on this tensor: rank " + std::to_string(ks.first_rank) + " pushed " +
               DataTypeName(ks.dtype) + " data of " + std::to_string(ks.tensor_bytes) + " bytes in total, rank " +
               std::to_string(h.sender_rank) + " pushed " + DataTypeName(push.dtype) + " data of " +
               std::to_string(h.tensor_bytes) + " bytes (or another shape)";
  }
  return mismatch;
}

void FailMismatchedRound(RoundServices& server, KeyState& ks, const Push& push, const std::string& why) {
  server.FailTensor(push.h, why);
  ks.waiting.clear();
  ks.contributions = 0;
}

}  // namespace bps
