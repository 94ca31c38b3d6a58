// Synchronous rounds of float16 and bfloat16: summed in float32 (a sum of
// halves loses the small addends), and the complete sum converted back into
// the pushes' type as the answer.
#pragma once
#include "server/round_handler.h"

namespace bps {

class HalfPrecisionRound final : public RoundHandler {
 public:
  using RoundHandler::RoundHandler;
  void Add(KeyState& ks, Push& push) override;
};

}  // namespace bps
