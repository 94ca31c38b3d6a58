// A push that disagrees with its key's round: every contribution to a key
// must describe the same tensor, or the sum would be silent garbage. The
// tensor is poisoned and every pusher told, naming the ranks and what differs
// (the terms themselves: round_agreement.h).
#pragma once
#include <string>

#include "server/round_agreement.h"
#include "server/round_handler.h"

namespace bps {

// "" when `push` may join the round of `ks` (its lock held), else the message.
// Sync rounds compare with the round's first push; async rounds never wait,
// so they compare with the key's last push.
std::string RoundMismatch(const KeyState& ks, const Push& push, const ServerTerms& terms);

// Fails the tensor of `push` on every worker, not only this round's pushers:
// ranks waiting on other partitions (or other keys of a different plan) of
// the tensor fail now. The round starts over empty.
void FailMismatchedRound(RoundServices& server, KeyState& ks, const Push& push, const std::string& why);

}  // namespace bps
