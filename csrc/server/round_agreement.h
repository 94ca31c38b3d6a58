// What every push of one round of one key must agree on, checked by the
// server as each push is accepted: the tensor's dtype, element count and
// shape (signature), the reduce op (average or sum), sync or async, the
// partition size that cut it, the number of machines and the round. A
// disagreement would otherwise be a silently different result on some ranks
// or a wait until BYTEPS_TIMEOUT; instead it is named at once, with both
// ranks and what differs, to every pusher of the tensor.
//
// Pure functions of headers: the caller keeps the round's first push (it
// already holds it among the pushes waiting for the round to complete).
#pragma once
#include <string>

#include "compression/compressor.h"
#include "ps/protocol.h"

namespace bps {

struct ServerTerms {
  int server_id = 0;
  bool async = false;  // this server's BYTEPS_ENABLE_ASYNC
};

// "" when `push` may be summed into the round whose first push is `first`
// (null: `push` opens the round). Otherwise a message naming the ranks and
// every term they disagree on, e.g. "ranks disagree on this tensor: rank 0
// averages it (average=True) but rank 1 sums it (average=False)". The server
// does not know tensor names; the worker that receives the message adds the
// name and its own shape.
std::string CheckPushTerms(const MessageHeader& push, const MessageHeader* first, const ServerTerms& server);

// Compressed pushes of one round (both kFlagCompressed) must use the same
// compressor, k, seed, error feedback and onebit's segment boundaries (the
// `cuts` after each header): "" when they do, else a message naming both
// ranks' compressors.
std::string CheckCodecTerms(const MessageHeader& push, const CodecHeader& push_codec, const uint32_t* push_cuts,
                            const MessageHeader& first, const CodecHeader& first_codec, const uint32_t* first_cuts);

}  // namespace bps
