// The server's round modes, one handler each: a push whose terms agree with
// its key's round (round_mismatch.h) is summed by the handler of its mode,
// which answers the contributors once the round is complete.
//   sync_round          full-precision sums, answered when every machine pushed
//   half_precision_round  float16 / bfloat16: summed in float32, answered converted
//   async_round         a running sum, every push applied and answered at once
//   compressed_round    decompressed into a float32 sum, answered compressed
//   round_mismatch      a push that disagrees with its round fails the tensor
// Server::HandlePush picks the handler; the handlers reach the server only
// through RoundServices.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/dtype.h"
#include "common/timeline.h"
#include "compression/compressor.h"
#include "ps/protocol.h"
#include "server/buffer_pool.h"
#include "server/key_table.h"
#include "transport/transport.h"

namespace bps {

// One push as the handlers see it, read once by the dispatch.
struct Push {
  Push(const std::shared_ptr<transport::Connection>& from, const MessageHeader& header,
       std::shared_ptr<AlignedBuffer> data)
      : conn(from), h(header), payload(std::move(data)), dtype(static_cast<DataType>(header.dtype)),
        compressed((header.flags & kFlagCompressed) != 0) {}

  const std::shared_ptr<transport::Connection>& conn;  // the pusher
  const MessageHeader& h;
  std::shared_ptr<AlignedBuffer> payload;  // let go once summed: back to the pool, warm for the next push
  const DataType dtype;
  const bool compressed;
  CodecHeader codec;       // a compressed push's (CompressedRound::Read)
  size_t count = 0;        // elements summed (a compressed push: decompressed)
  size_t acc_bytes = 0;    // the sum of `count` elements (float32 for 16-bit types)
  bool opens_key = false;  // the key's first push, or its first since the tensor was resized
};

// What a handler may ask of the server.
class RoundServices {
 public:
  virtual ~RoundServices() = default;
  virtual int server_id() const = 0;
  // A buffer of `bytes` from the pool; false (and the pusher told) when memory ran out.
  virtual bool TakeBuffer(size_t bytes, const Push& push, std::shared_ptr<AlignedBuffer>* out) = 0;
  // `answer`, whose payload is `wire`, to `to` (counted in the server's bytes out).
  virtual void Answer(const std::shared_ptr<transport::Connection>& to, const MessageHeader& answer,
                      const std::shared_ptr<AlignedBuffer>& wire) = 0;
  // The tensor of `h` is poisoned and every worker told `why`.
  virtual void FailTensor(const MessageHeader& h, const std::string& why) = 0;
  virtual Timeline& timeline() = 0;
};

class RoundHandler {
 public:
  explicit RoundHandler(RoundServices* server) : server_(server) {}
  virtual ~RoundHandler() = default;
  // Sums `push` into the round of `ks` (its lock held, the round's terms
  // agreed and recorded) and answers once the round is complete.
  virtual void Add(KeyState& ks, Push& push) = 0;

 protected:
  // `push` joins the round's contributors; true once every machine pushed.
  bool JoinRound(KeyState& ks, const Push& push);
  // The round is complete: `wire` (its payload `answer_bytes`; a compressed
  // answer's may differ from the pushes') goes to every contributor from one
  // buffer, and the key moves to its next round.
  void AnswerRound(KeyState& ks, const std::shared_ptr<AlignedBuffer>& wire, uint64_t answer_bytes);
  // The timeline's span of one sum ("server_sum"), when the round is traced.
  uint64_t SumStarts(const MessageHeader& h);
  void SumEnded(const MessageHeader& h, uint64_t started_us);

  RoundServices* const server_;
};

}  // namespace bps
