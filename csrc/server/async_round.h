// Asynchronous rounds (BYTEPS_ENABLE_ASYNC=1): the key holds a running sum;
// every push is applied and answered at once with the sum so far, never
// waiting for the other machines.
#pragma once
#include "server/round_handler.h"

namespace bps {

class AsyncRound final : public RoundHandler {
 public:
  using RoundHandler::RoundHandler;
  void Add(KeyState& ks, Push& push) override;
};

}  // namespace bps
