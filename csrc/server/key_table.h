// The server's round state, sharded so that pushes of different keys never
// share a lock: a shard's mutex is held only to find or create a key's state,
// and each key's round is guarded by that key's own mutex (summation of one
// key is serial anyway: every push adds into the same accumulator). Also the
// 64-byte-aligned buffers that payloads land in, pooled per I/O thread.
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
#include "ps/protocol.h"
#include "transport/transport.h"

namespace bps {

struct AlignedBuffer {
  explicit AlignedBuffer(size_t n);
  ~AlignedBuffer();
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  char* data = nullptr;
  size_t size = 0;
};

// Buffers by exact size, used by one I/O thread only (no lock).
class BufferPool {
 public:
  std::shared_ptr<AlignedBuffer> Take(size_t bytes);
  // Keeps `b` for reuse if nobody else holds it and the pool is not full.
  void Give(std::shared_ptr<AlignedBuffer> b);

 private:
  std::multimap<size_t, std::shared_ptr<AlignedBuffer>> free_;
};

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
  std::shared_ptr<AlignedBuffer> acc;      // float32 for 16-bit types
  std::shared_ptr<AlignedBuffer> wire[2];  // response buffers, by round parity
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
