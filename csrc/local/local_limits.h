// Bounds shared by the machine-local layer's shared-memory structures.
#pragma once

namespace bps {

constexpr int kMaxLocalRanks = 16;

}  // namespace bps
