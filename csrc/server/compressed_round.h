// Compressed rounds (csrc/compression): each machine's push is decompressed
// into the key's float32 sum, and the complete sum is compressed by the same
// codec as the answer; topk's exact sum is kept sparse instead
// (compression/topk_sum.h: the same answer in O(machines x k), not O(count)). Async rounds never see one: workers with
// BYTEPS_ENABLE_ASYNC=1 do not compress, and the round's terms refuse the mix.
#pragma once
#include <string>

#include "server/round_handler.h"

namespace bps {

class CompressedRound final : public RoundHandler {
 public:
  using RoundHandler::RoundHandler;
  // Checks a compressed push before anything decodes it (the indices it
  // names are written) and reads its codec header into push->codec: "" when
  // it may be summed, else what is wrong with it.
  static std::string Read(Push* push);
  void Add(KeyState& ks, Push& push) override;
};

}  // namespace bps
