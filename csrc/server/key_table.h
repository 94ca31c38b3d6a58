// The server's round state, sharded so that pushes of different keys never
// share a lock: a shard's mutex is held only to find or create a key's state,
// and each key's round is guarded by that key's own mutex (summation of one
// key is serial anyway: every push adds into the same accumulator). A key
// between rounds holds no buffer (buffer_pool.h).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/dtype.h"
#include "compression/compressor.h"
#include "compression/topk_sum.h"
#include "server/buffer_pool.h"
#include "ps/protocol.h"
#include "transport/transport.h"

namespace bps {

// One key's round. Guarded by `mu`.
struct KeyState {
  std::mutex mu;
  bool initialized = false;  // a push fixed dtype and size
  DataType dtype = DataType::kFloat32;
  uint64_t payload_bytes = 0;
  uint32_t round = 0;
  uint64_t signature = 0;
  uint64_t tensor_bytes = 0;
  uint32_t first_rank = 0;
  int contributions = 0;
  bool compressed = false;  // the round's pushes are compressed (codec)
  CodecHeader codec;
  std::vector<uint32_t> cuts;  // onebit's segment boundaries of the round (codec.cuts of them)
  // Server error feedback (ServerErrorFeedback(codec)): what re-compressing
  // the sum dropped, added to the next round's sum; fresh when the codec changes.
  std::vector<float> residual;
  CodecHeader residual_codec;
  // The round's sum (float32 for 16-bit types), from the pool; it goes out
  // as the answer (or is let go once converted into one). Async: the running sum.
  std::shared_ptr<AlignedBuffer> acc;
  // topk's exact sum (SumsSparsely): the round's entries instead of `acc`.
  SparseTopKSum sparse;
  std::vector<std::pair<std::shared_ptr<transport::Connection>, MessageHeader>> waiting;
};

class KeyTable {
 public:
  // The state of `key`, created on first use; the pointer stays valid for
  // the table's life (keys are not reclaimed).
  KeyState* Get(uint64_t key);

 private:
  static constexpr size_t kShards = 64;
  struct Shard {
    std::mutex mu;
    std::unordered_map<uint64_t, std::unique_ptr<KeyState>> keys;
  };
  Shard shards_[kShards];
};

}  // namespace bps
