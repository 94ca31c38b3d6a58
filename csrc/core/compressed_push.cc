// The worker's half of compression through the servers (issue 29): which
// pushes are compressed, and their per-key state (error feedback, buffers).
// The stage table (stage_pipeline.cc) compresses in Push and decompresses the
// answer in AwaitAnswer; the server's half is in csrc/server/server.cc.
#include <cstring>

#include "common/hashing.h"
#include "core/engine.h"

namespace bps {

Status Engine::DeclareCompression(const std::string& name, const std::string& spec_text,
                                  std::vector<uint64_t> segment_sizes) {
  if (name.empty()) return Status::Invalid("declare_compression needs a tensor name");
  CompressionSpec spec;
  BPS_RETURN_IF_ERROR(ParseCompressionSpec(spec_text, &spec).WithContext("tensor '" + name + "'"));
  spec.segment_ends = SegmentEndsOf(segment_sizes);
  DeclareCompressionSpec(name, std::move(spec));
  return Status::OK();
}

void Engine::DeclareCompressionSpec(const std::string& name, CompressionSpec spec) {
  std::lock_guard<std::mutex> lock(compression_mu_);
  auto known = compression_by_name_.find(HashName(name));
  // Hooks declare before every push: an unchanged declaration stays as it is.
  if (spec.enabled() && known != compression_by_name_.end() && known->second == spec) return;
  if (spec.enabled()) {
    compression_by_name_[HashName(name)] = std::move(spec);
  } else if (known != compression_by_name_.end()) {
    compression_by_name_.erase(known);
  }
}

bool Engine::DeclaredCompression(const std::string& name, CompressionSpec* spec) {
  std::lock_guard<std::mutex> lock(compression_mu_);
  auto known = compression_by_name_.find(HashName(name));
  if (known == compression_by_name_.end()) return false;
  *spec = known->second;
  return true;
}

CompressedSlice* Engine::CompressionFor(const TensorOp& op, uint64_t key, uint64_t offset, uint64_t count) {
  const uint64_t tensor_bytes = static_cast<uint64_t>(op.count) * DataTypeSize(op.dtype);
  // The same decision on every rank: it depends only on what they agree on
  // (dtype, size, declaration, configuration), which the server checks.
  if (!op.compression.enabled() || op.dtype != DataType::kFloat32 || config_.enable_async ||
      tensor_bytes < static_cast<uint64_t>(config_.min_compress_bytes) || count == 0 || count > UINT32_MAX) {
    return nullptr;
  }
  std::vector<uint32_t> cuts = SliceCuts(op.compression, offset, count);
  const CodecHeader codec = MakeCodecHeader(op.compression, count, cuts.size());
  const uint64_t wire_bytes = CompressedBytes(codec);
  if (wire_bytes >= count * sizeof(float)) return nullptr;  // tiny slices: no gain
  auto& slot = compressed_slices_[key];
  if (!slot || memcmp(&slot->codec, &codec, sizeof(codec)) != 0 || slot->cuts != cuts) {
    // First use, or the tensor or its compressor changed: fresh state.
    slot.reset(new CompressedSlice);
    slot->codec = codec;
    slot->cuts = std::move(cuts);
    slot->wire_bytes = wire_bytes;
    slot->answer_bytes = CompressedBytes(AnswerCodec(codec, static_cast<uint32_t>(config_.num_worker)));
    if (op.compression.error_feedback) slot->residual.assign(count, 0.0f);
    if (op.compression.momentum > 0) slot->momentum.assign(count, 0.0f);
    slot->send.resize(wire_bytes);
    slot->answer.resize(slot->answer_bytes);
  }
  return slot.get();
}

SliceCompression* Engine::SliceCompressionFor(const TensorOp& op, PartitionTask& t) {
  LocalReducer* R = op.reducer;
  // Equal machines only: this rank's one network slice is then its local
  // slice, which the reducer holds (with machines of different sizes the
  // network slices cut local slices, and the host codec compresses them).
  if (!R || op.device < 0 || !config_.distributed() || !op.compression.enabled() || !config_.gpu_compress_on_device ||
      config_.distinct_local_sizes().size() != 1) {
    return nullptr;
  }
  // The push that Push will send: the same key and slice, so the same slot.
  PlanPushes(t);
  if (t.pushes.size() != 1) return nullptr;
  const NetworkPush& push = t.pushes[0];
  const uint64_t key = push.key;
  const Range& s = push.slice;
  CompressedSlice* z = CompressionFor(op, key, static_cast<uint64_t>(t.range.offset + s.offset),
                                      static_cast<uint64_t>(s.count));
  if (!z) return nullptr;
  if (!z->on_reducer) {
    // The answer lands in the slice's staging: it must fit there.
    if (z->answer_bytes > static_cast<uint64_t>(s.count) * sizeof(float) || !R->CompressesSlices(z->codec)) {
      return nullptr;
    }
    auto c = std::make_unique<SliceCompression>();
    c->push = z->codec;
    c->answer = AnswerCodec(z->codec, static_cast<uint32_t>(config_.num_worker));
    c->cuts = z->cuts;
    c->key = key;
    c->error_feedback = !z->residual.empty();
    c->momentum = !z->momentum.empty();
    c->mu = static_cast<float>(op.compression.momentum);
    c->nesterov = op.compression.nesterov;
    z->on_reducer = std::move(c);
    z->reducer = R;
  }
  return z->on_reducer.get();
}

}  // namespace bps
