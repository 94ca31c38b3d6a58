#include "server/compressed_round.h"

#include <cstring>

namespace bps {

std::string CompressedRound::Read(Push* push) {
  if (push->dtype != DataType::kFloat32) return "a compressed push must carry float32 data";
  std::string bad = ValidateCompressed(push->payload->data, push->h.payload_bytes);
  if (!bad.empty()) return bad;
  memcpy(&push->codec, push->payload->data, sizeof(push->codec));
  return "";
}

void CompressedRound::Add(KeyState& ks, Push& push) {
  const MessageHeader& h = push.h;
  const bool sparse = SumsSparsely(ks.codec);
  if (sparse) {
    // topk's exact sum, kept as the pushes' entries (compression/topk_sum.h).
    // Read checked the indices (in range, ascending): Add takes every push.
    if (ks.contributions == 0) ks.sparse.Clear();
    ks.sparse.Add(push.payload->data + sizeof(CodecHeader), ks.codec.k, ks.codec.count);
  } else {
    const size_t acc_bytes = push.count * sizeof(float);
    if ((!ks.acc || ks.acc->size != acc_bytes) && !server_->TakeBuffer(acc_bytes, push, &ks.acc)) return;
    // The sum in float32 of what each machine's push decompresses to.
    float* acc = reinterpret_cast<float*>(ks.acc->data);
    if (ks.contributions == 0) {
      Decompress(push.payload->data, h.key, h.round, acc);
    } else {
      DecompressAdd(push.payload->data, h.key, h.round, acc);
    }
  }
  push.payload.reset();
  if (!JoinRound(ks, push)) return;
  // Round complete: the sum, compressed by the same codec (with the key's
  // error feedback when the codec asks for it), to every contributor from
  // one buffer of the pool (topk's answer may be larger than a push: the
  // exact sum of every machine's entries).
  const CodecHeader answer = AnswerCodec(ks.codec, h.num_contributors);
  const uint64_t answer_bytes = CompressedBytes(answer);
  std::shared_ptr<AlignedBuffer> slot;
  if (!server_->TakeBuffer(answer_bytes, push, &slot)) return;
  if (sparse) {
    memcpy(slot->data, &answer, sizeof(answer));
    ks.sparse.WriteAnswer(answer, slot->data + sizeof(answer));
  } else {
    float* residual = nullptr;
    if (ServerErrorFeedback(ks.codec)) {
      if (ks.residual.size() != push.count || memcmp(&ks.residual_codec, &ks.codec, sizeof(CodecHeader)) != 0) {
        ks.residual.assign(push.count, 0.0f);
        ks.residual_codec = ks.codec;
      }
      residual = ks.residual.data();
    }
    Compress(answer, reinterpret_cast<float*>(ks.acc->data), residual, h.key, h.round, slot->data, ks.cuts.data());
    ks.acc.reset();
  }
  AnswerRound(ks, slot, answer_bytes);
}

}  // namespace bps
