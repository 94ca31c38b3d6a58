// Synchronous rounds of full-precision types: each push is added into the
// round's sum, and the complete round's sum is the answer to every machine.
#pragma once
#include "server/round_handler.h"

namespace bps {

class SyncRound final : public RoundHandler {
 public:
  using RoundHandler::RoundHandler;
  void Add(KeyState& ks, Push& push) override;
};

}  // namespace bps
