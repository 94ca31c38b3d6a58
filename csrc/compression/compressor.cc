#include "compression/compressor.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "compression/codec.h"
#include "compression/error_feedback_element.h"
#include "compression/onebit_kernels.h"

namespace bps {
namespace {

constexpr uint8_t kOptionErrorFeedback = 1;
constexpr uint8_t kOptionMomentum = 2;
constexpr uint8_t kOptionNesterov = 4;
constexpr uint8_t kOptionServerErrorFeedback = 8;
constexpr uint8_t kOptionServerTopK = 16;

bool ParseDouble(const std::string& text, double* v) {
  if (text.empty()) return false;
  char* end = nullptr;
  *v = strtod(text.c_str(), &end);
  return end && *end == '\0';
}

uint64_t CutBytes(const CodecHeader& h) { return uint64_t{h.cuts} * sizeof(uint32_t); }

// "onebit, topk or randomk": the registered codecs, by wire id.
std::string CodecNames() {
  const std::vector<const Codec*> codecs = RegisteredCodecs();
  std::string text;
  for (size_t i = 0; i < codecs.size(); ++i) {
    if (i > 0) text += i + 1 == codecs.size() ? " or " : ", ";
    text += codecs[i]->name();
  }
  return text;
}

}  // namespace

std::shared_ptr<const std::vector<uint64_t>> SegmentEndsOf(const std::vector<uint64_t>& sizes) {
  uint64_t end = 0;
  std::vector<uint64_t> ends;
  for (uint64_t size : sizes) {
    if (size == 0) continue;
    end += size;
    ends.push_back(end);
  }
  if (ends.size() < 2) return nullptr;
  return std::make_shared<const std::vector<uint64_t>>(std::move(ends));
}

Status ParseCompressionSpec(const std::string& text, CompressionSpec* spec) {
  *spec = CompressionSpec();
  const auto colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  const std::string grammar =
      ": expected " + CodecNames() +
      ", then options after ':' separated by ',' "
      "(ratio=<0..0.5>, seed=<int>, ef=<0|1>, momentum=<0..1>, nesterov=<0|1>, server_ef=<0|1>, server_topk=<0|1>), "
      "e.g. 'topk:ratio=0.01' "
      "or 'onebit:momentum=0.9'";
  if (kind.empty() || kind == "none") {
    if (colon != std::string::npos) return Status::Invalid("compression '" + text + "' has options" + grammar);
    return Status::OK();
  }
  const Codec* codec = FindCodec(kind);
  if (!codec) return Status::Invalid("unknown compressor '" + kind + "' in '" + text + "'" + grammar);
  spec->codec = codec;
  if (colon == std::string::npos) return Status::OK();
  std::string rest = text.substr(colon + 1);
  size_t start = 0;
  while (start <= rest.size()) {
    size_t end = rest.find(',', start);
    if (end == std::string::npos) end = rest.size();
    const std::string item = rest.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    const auto eq = item.find('=');
    const std::string name = item.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    double v = 0;
    if (eq == std::string::npos || !ParseDouble(value, &v)) {
      return Status::Invalid("compression option '" + item + "' in '" + text + "' needs a number" + grammar);
    }
    if (name == "ratio" && codec->takes(Codec::kRatio)) {
      // Above one half, indices and values of topk outweigh the dense slice.
      if (!(v > 0 && v <= 0.5)) {
        return Status::Invalid("compression '" + text + "': ratio must be in (0, 0.5], got " + value);
      }
      spec->ratio = v;
    } else if (name == "seed" && codec->takes(Codec::kSeed)) {
      if (v < 0 || v > 4294967295.0 || v != std::floor(v)) {
        return Status::Invalid("compression '" + text + "': seed must be an integer in [0, 2^32)");
      }
      spec->seed = static_cast<uint32_t>(v);
    } else if (name == "ef") {
      if (v != 0 && v != 1) return Status::Invalid("compression '" + text + "': ef must be 0 or 1");
      spec->error_feedback = v == 1;
    } else if (name == "momentum") {
      if (!(v >= 0 && v < 1)) {
        return Status::Invalid("compression '" + text + "': momentum must be in [0, 1), got " + value);
      }
      spec->momentum = v;
    } else if (name == "nesterov") {
      if (v != 0 && v != 1) return Status::Invalid("compression '" + text + "': nesterov must be 0 or 1");
      spec->nesterov = v == 1;
    } else if (name == "server_ef") {
      if (v != 0 && v != 1) return Status::Invalid("compression '" + text + "': server_ef must be 0 or 1");
      spec->server_error_feedback = v == 1;
    } else if (name == "server_topk" && codec->takes(Codec::kServerTopK)) {
      if (v != 0 && v != 1) return Status::Invalid("compression '" + text + "': server_topk must be 0 or 1");
      spec->server_topk = v == 1;
    } else {
      return Status::Invalid("compression option '" + name + "' does not apply to " + kind + " in '" +
                                     text + "'" + grammar);
    }
  }
  return Status::OK();
}

std::string DescribeSpec(const CompressionSpec& spec) {
  if (!spec.enabled()) return "none";
  const Codec& codec = *spec.codec;
  std::string text = codec.name();
  char buf[64];
  if (codec.takes(Codec::kRatio)) {
    snprintf(buf, sizeof(buf), ":ratio=%g,", spec.ratio);
    text += buf;
  } else {
    text += ":";
  }
  text += spec.error_feedback ? "ef=1" : "ef=0";
  if (codec.takes(Codec::kSeed)) text += ",seed=" + std::to_string(spec.seed);
  if (spec.momentum > 0) {
    snprintf(buf, sizeof(buf), ",momentum=%g", spec.momentum);
    text += buf;
    if (!spec.nesterov) text += ",nesterov=0";
  }
  if (spec.server_error_feedback) text += ",server_ef=1";
  if (spec.server_topk) text += ",server_topk=1";
  return text;
}

std::vector<uint32_t> SliceCuts(const CompressionSpec& spec, uint64_t offset, uint64_t count) {
  std::vector<uint32_t> cuts;
  if (!spec.enabled() || !spec.codec->takes(Codec::kSegments) || !spec.segment_ends) return cuts;
  const auto& ends = *spec.segment_ends;
  for (auto it = std::upper_bound(ends.begin(), ends.end(), offset);
       it != ends.end() && *it < offset + count && cuts.size() < kMaxCuts; ++it) {
    cuts.push_back(static_cast<uint32_t>(*it - offset));
  }
  return cuts;
}

CodecHeader MakeCodecHeader(const CompressionSpec& spec, uint64_t count, size_t cuts) {
  CodecHeader h;
  h.cuts = static_cast<uint16_t>(std::min<size_t>(cuts, kMaxCuts));
  h.kind = spec.enabled() ? spec.codec->wire_id() : 0;
  h.options = spec.error_feedback ? kOptionErrorFeedback : 0;
  if (spec.momentum > 0) h.options |= spec.nesterov ? kOptionMomentum | kOptionNesterov : kOptionMomentum;
  if (spec.server_error_feedback) h.options |= kOptionServerErrorFeedback;
  if (spec.server_topk) h.options |= kOptionServerTopK;
  h.count = static_cast<uint32_t>(count);
  if (spec.enabled() && spec.codec->takes(Codec::kRatio)) {
    const double k = std::floor(static_cast<double>(count) * spec.ratio);
    h.k = static_cast<uint32_t>(std::max(1.0, std::min(k, static_cast<double>(count))));
  }
  if (spec.enabled() && spec.codec->takes(Codec::kSeed)) h.seed = spec.seed;
  return h;
}

bool ServerErrorFeedback(const CodecHeader& h) { return (h.options & kOptionServerErrorFeedback) != 0; }
bool ServerTopK(const CodecHeader& h) { return (h.options & kOptionServerTopK) != 0; }

CodecHeader AnswerCodec(const CodecHeader& push, uint32_t machines) {
  const Codec* codec = FindCodec(push.kind);
  return codec ? codec->Answer(push, machines) : push;
}

uint64_t CompressedBytes(const CodecHeader& h) {
  const Codec* codec = FindCodec(h.kind);
  return codec ? sizeof(CodecHeader) + CutBytes(h) + codec->BodyBytes(h) : 0;
}

std::string DescribeCodec(const CodecHeader& h) {
  const Codec* codec = FindCodec(h.kind);
  if (!codec) return "unknown codec " + std::to_string(h.kind);
  std::string text = codec->name();
  if (codec->takes(Codec::kRatio)) text += " (k=" + std::to_string(h.k);
  if (codec->takes(Codec::kSeed)) text += ", seed=" + std::to_string(h.seed);
  if (codec->takes(Codec::kRatio)) text += ")";
  if (h.cuts) text += " (" + std::to_string(h.cuts + 1) + " scales)";
  text += (h.options & kOptionErrorFeedback) ? " with error feedback" : " without error feedback";
  if (h.options & kOptionMomentum) {
    text += (h.options & kOptionNesterov) ? " and nesterov momentum" : " and momentum";
  }
  if (h.options & kOptionServerErrorFeedback) text += ", server error feedback";
  if (h.options & kOptionServerTopK) text += ", server top-k";
  return text;
}

std::string ValidateCompressed(const char* payload, uint64_t payload_bytes) {
  if (payload_bytes < sizeof(CodecHeader)) return "compressed push of " + std::to_string(payload_bytes) + " bytes has no codec header";
  CodecHeader h;
  memcpy(&h, payload, sizeof(h));
  const Codec* codec = FindCodec(h.kind);
  if (!codec) return "compressed push names unknown compressor " + std::to_string(h.kind);
  if (h.count == 0) return "compressed push of zero elements";
  if (codec->takes(Codec::kRatio) && (h.k == 0 || h.k > h.count)) {
    return "compressed push has k=" + std::to_string(h.k) + " of " + std::to_string(h.count) + " elements";
  }
  if (!codec->takes(Codec::kSegments) && h.cuts != 0) {
    return "compressed push of " + std::string(codec->name()) + " carries segment boundaries (onebit only)";
  }
  if (CompressedBytes(h) != payload_bytes) {
    return DescribeCodec(h) + " of " + std::to_string(h.count) + " elements takes " +
           std::to_string(CompressedBytes(h)) + " bytes, the push carried " + std::to_string(payload_bytes);
  }
  uint32_t previous = 0;
  for (uint32_t i = 0; i < h.cuts; ++i) {
    uint32_t cut;
    memcpy(&cut, payload + sizeof(CodecHeader) + uint64_t{i} * sizeof(uint32_t), sizeof(cut));
    if (cut <= previous || cut >= h.count) {
      return "onebit push's segment boundary " + std::to_string(cut) + " is not ascending inside its " +
             std::to_string(h.count) + " elements";
    }
    previous = cut;
  }
  return codec->ValidateBody(h, payload + sizeof(CodecHeader) + CutBytes(h));
}

const uint32_t* PayloadCuts(const char* payload) {
  return reinterpret_cast<const uint32_t*>(payload + sizeof(CodecHeader));
}

void Compress(const CodecHeader& h, const float* x, const SliceState& state, uint64_t key, uint32_t round,
              char* out) {
  memcpy(out, &h, sizeof(h));
  if (h.cuts) memcpy(out + sizeof(h), state.cuts, CutBytes(h));
  char* body = out + sizeof(h) + CutBytes(h);
  const uint32_t n = h.count;
  float* residual = state.residual;
  if (state.momentum) {
    // Momentum before the compressor, so the optimizer's momentum does not
    // accumulate what the compressor got wrong (signSGD with SGD momentum
    // fails to train: docs/compression.md). x becomes what momentum SGD
    // would step along: x + mu m (nesterov) or m.
    float* m = state.momentum;
    const float mu = state.mu;
    for (uint32_t i = 0; i < n; ++i) m[i] = element::MomentumUpdate(m[i], x[i], mu);
    thread_local std::vector<float> stepped;
    if (state.nesterov) {
      stepped.resize(n);
      for (uint32_t i = 0; i < n; ++i) stepped[i] = element::MomentumStepped(x[i], m[i], mu, true);
      x = stepped.data();
    } else {
      x = m;
    }
  }
  // With error feedback the residual becomes the corrected gradient, then
  // what the compressor dropped of it.
  const float* c = x;
  if (residual) {
    onebit::AddInto(residual, x, n);
    c = residual;
  }
  FindCodec(h.kind)->Encode(h, c, state.cuts, key, round, residual, body);
}

namespace {
// A compressed payload: its header (copied out: the payload need not be
// aligned), codec, segment boundaries and body.
struct Encoded {
  CodecHeader h;
  const Codec* codec;
  const uint32_t* cuts;
  const char* body;
};

Encoded Parse(const char* in) {
  Encoded e;
  memcpy(&e.h, in, sizeof(e.h));
  e.codec = FindCodec(e.h.kind);
  e.cuts = PayloadCuts(in);
  e.body = in + sizeof(e.h) + CutBytes(e.h);
  return e;
}
}  // namespace

void Decompress(const char* in, uint64_t key, uint32_t round, float* out) {
  const Encoded e = Parse(in);
  e.codec->Decode(e.h, e.cuts, e.body, key, round, out);
}

void DecompressAdd(const char* in, uint64_t key, uint32_t round, float* acc) {
  const Encoded e = Parse(in);
  e.codec->DecodeAdd(e.h, e.cuts, e.body, key, round, acc);
}

}  // namespace bps
