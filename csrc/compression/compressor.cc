#include "compression/compressor.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

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

// Whole 32-bit words of sign bits: float32 frames carry multiples of 4 bytes.
uint64_t OneBitSignBytes(uint64_t n) { return (n + 31) / 32 * 4; }
uint64_t OneBitBodyBytes(uint64_t n, uint64_t cuts) { return (cuts + 1) * sizeof(float) + OneBitSignBytes(n); }
uint64_t CutBytes(const CodecHeader& h) { return uint64_t{h.cuts} * sizeof(uint32_t); }

// Segment s of a slice of n elements: [begin, end).
uint32_t SegmentBegin(const uint32_t* cuts, uint32_t s) { return s == 0 ? 0 : cuts[s - 1]; }
uint32_t SegmentEnd(const uint32_t* cuts, uint32_t num_cuts, uint32_t s, uint32_t n) {
  return s == num_cuts ? n : cuts[s];
}

inline float SignedAt(const uint8_t* bits, uint32_t i, float scale) {
  return (bits[i >> 3] >> (i & 7)) & 1 ? -scale : scale;
}

// Segment [lo, hi) of a onebit payload: kernel(first, count) from its first
// element on a byte boundary of the sign bits (the kernels start at bit 0 of
// a byte), head(i) for each element before it.
template <typename Head, typename Kernel>
void OverSegment(uint32_t lo, uint32_t hi, Head head, Kernel kernel) {
  const uint32_t aligned = static_cast<uint32_t>(std::min<uint64_t>(hi, (uint64_t{lo} + 7) / 8 * 8));
  for (uint32_t i = lo; i < aligned; ++i) head(i);
  if (aligned < hi) kernel(aligned, hi - aligned);
}

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The k largest |x|, ties to the lower index, ascending.
void TopKIndices(const float* x, uint32_t n, uint32_t k, std::vector<uint32_t>* out) {
  thread_local std::vector<uint32_t> order;
  order.resize(n);
  for (uint32_t i = 0; i < n; ++i) order[i] = i;
  auto larger = [x](uint32_t a, uint32_t b) {
    const float fa = std::fabs(x[a]), fb = std::fabs(x[b]);
    return fa > fb || (fa == fb && a < b);
  };
  if (k < n) std::nth_element(order.begin(), order.begin() + k, order.end(), larger);
  out->assign(order.begin(), order.begin() + k);
  std::sort(out->begin(), out->end());
}

// Indices of a sparse payload (topk sends them, randomk derives them).
const uint32_t* SparseIndices(const CodecHeader& h, const char* body, uint64_t key, uint32_t round,
                              std::vector<uint32_t>* scratch) {
  if (static_cast<CompressorKind>(h.kind) == CompressorKind::kTopK) return reinterpret_cast<const uint32_t*>(body);
  RandomIndices(h.seed, key, round, h.count, h.k, scratch);
  return scratch->data();
}

const float* SparseValues(const CodecHeader& h, const char* body) {
  if (static_cast<CompressorKind>(h.kind) == CompressorKind::kTopK) {
    return reinterpret_cast<const float*>(body + uint64_t{h.k} * sizeof(uint32_t));
  }
  return reinterpret_cast<const float*>(body);
}

}  // namespace

const char* CompressorName(CompressorKind kind) {
  switch (kind) {
    case CompressorKind::kNone: return "none";
    case CompressorKind::kOneBit: return "onebit";
    case CompressorKind::kTopK: return "topk";
    case CompressorKind::kRandomK: return "randomk";
  }
  return "unknown";
}

Status ParseCompressionSpec(const std::string& text, CompressionSpec* spec) {
  *spec = CompressionSpec();
  const auto colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  const std::string grammar =
      ": expected onebit, topk or randomk, then options after ':' separated by ',' "
      "(ratio=<0..0.5>, seed=<int>, ef=<0|1>, momentum=<0..1>, nesterov=<0|1>, server_ef=<0|1>, server_topk=<0|1>), "
      "e.g. 'topk:ratio=0.01' "
      "or 'onebit:momentum=0.9'";
  if (kind.empty() || kind == "none") {
    if (colon != std::string::npos) return Status::Invalid("compression '" + text + "' has options" + grammar);
    return Status::OK();
  }
  if (kind == "onebit") {
    spec->kind = CompressorKind::kOneBit;
  } else if (kind == "topk") {
    spec->kind = CompressorKind::kTopK;
  } else if (kind == "randomk") {
    spec->kind = CompressorKind::kRandomK;
  } else {
    return Status::Invalid("unknown compressor '" + kind + "' in '" + text + "'" + grammar);
  }
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
    if (name == "ratio" && spec->kind != CompressorKind::kOneBit) {
      // Above one half, indices and values of topk outweigh the dense slice.
      if (!(v > 0 && v <= 0.5)) {
        return Status::Invalid("compression '" + text + "': ratio must be in (0, 0.5], got " + value);
      }
      spec->ratio = v;
    } else if (name == "seed" && spec->kind == CompressorKind::kRandomK) {
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
    } else if (name == "server_topk" && spec->kind == CompressorKind::kTopK) {
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
  std::string text = CompressorName(spec.kind);
  char buf[64];
  if (spec.kind != CompressorKind::kOneBit) {
    snprintf(buf, sizeof(buf), ":ratio=%g", spec.ratio);
    text += buf;
  }
  text += spec.kind == CompressorKind::kOneBit ? ":" : ",";
  text += spec.error_feedback ? "ef=1" : "ef=0";
  if (spec.kind == CompressorKind::kRandomK) text += ",seed=" + std::to_string(spec.seed);
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
  if (spec.kind != CompressorKind::kOneBit || !spec.segment_ends) return cuts;
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
  h.kind = static_cast<uint8_t>(spec.kind);
  h.options = spec.error_feedback ? kOptionErrorFeedback : 0;
  if (spec.momentum > 0) h.options |= spec.nesterov ? kOptionMomentum | kOptionNesterov : kOptionMomentum;
  if (spec.server_error_feedback) h.options |= kOptionServerErrorFeedback;
  if (spec.server_topk) h.options |= kOptionServerTopK;
  h.count = static_cast<uint32_t>(count);
  if (spec.kind == CompressorKind::kTopK || spec.kind == CompressorKind::kRandomK) {
    const double k = std::floor(static_cast<double>(count) * spec.ratio);
    h.k = static_cast<uint32_t>(std::max(1.0, std::min(k, static_cast<double>(count))));
  }
  if (spec.kind == CompressorKind::kRandomK) h.seed = spec.seed;
  return h;
}

bool ServerErrorFeedback(const CodecHeader& h) { return (h.options & kOptionServerErrorFeedback) != 0; }

CodecHeader AnswerCodec(const CodecHeader& push, uint32_t machines) {
  CodecHeader answer = push;
  if (static_cast<CompressorKind>(push.kind) == CompressorKind::kTopK && !(push.options & kOptionServerTopK)) {
    answer.k = static_cast<uint32_t>(std::min<uint64_t>(push.count, uint64_t{push.k} * std::max(1u, machines)));
  }
  return answer;
}

uint64_t CompressedBytes(const CodecHeader& h) {
  switch (static_cast<CompressorKind>(h.kind)) {
    case CompressorKind::kOneBit: return sizeof(CodecHeader) + CutBytes(h) + OneBitBodyBytes(h.count, h.cuts);
    case CompressorKind::kTopK: return sizeof(CodecHeader) + uint64_t{h.k} * (sizeof(uint32_t) + sizeof(float));
    case CompressorKind::kRandomK: return sizeof(CodecHeader) + uint64_t{h.k} * sizeof(float);
    default: return 0;
  }
}

std::string DescribeCodec(const CodecHeader& h) {
  const auto kind = static_cast<CompressorKind>(h.kind);
  std::string text = CompressorName(kind);
  if (kind == CompressorKind::kTopK || kind == CompressorKind::kRandomK) text += " (k=" + std::to_string(h.k);
  if (kind == CompressorKind::kRandomK) text += ", seed=" + std::to_string(h.seed);
  if (kind == CompressorKind::kTopK || kind == CompressorKind::kRandomK) text += ")";
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
  const auto kind = static_cast<CompressorKind>(h.kind);
  if (kind != CompressorKind::kOneBit && kind != CompressorKind::kTopK && kind != CompressorKind::kRandomK) {
    return "compressed push names unknown compressor " + std::to_string(h.kind);
  }
  if (h.count == 0) return "compressed push of zero elements";
  if (kind != CompressorKind::kOneBit && (h.k == 0 || h.k > h.count)) {
    return "compressed push has k=" + std::to_string(h.k) + " of " + std::to_string(h.count) + " elements";
  }
  if (kind != CompressorKind::kOneBit && h.cuts != 0) {
    return "compressed push of " + std::string(CompressorName(kind)) + " carries segment boundaries (onebit only)";
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
  if (kind == CompressorKind::kTopK) {
    const char* indices = payload + sizeof(CodecHeader);
    for (uint32_t i = 0; i < h.k; ++i) {
      uint32_t index;
      memcpy(&index, indices + uint64_t{i} * sizeof(uint32_t), sizeof(index));
      if (index >= h.count) return "topk push names element " + std::to_string(index) + " of " + std::to_string(h.count);
    }
  }
  return "";
}

void RandomIndices(uint32_t seed, uint64_t key, uint32_t round, uint32_t n, uint32_t k, std::vector<uint32_t>* out) {
  uint64_t state = key ^ (uint64_t{seed} << 32) ^ (uint64_t{round} * 0xD1B54A32D192ED03ull);
  thread_local std::vector<uint64_t> taken;
  taken.assign((uint64_t{n} + 63) / 64, 0);
  out->clear();
  out->reserve(k);
  auto has = [&](uint32_t i) { return (taken[i >> 6] >> (i & 63)) & 1; };
  auto add = [&](uint32_t i) {
    taken[i >> 6] |= uint64_t{1} << (i & 63);
    out->push_back(i);
  };
  for (uint64_t j = n - k; j < n; ++j) {  // Floyd: k distinct draws, k random numbers
    const uint32_t t = static_cast<uint32_t>(SplitMix64(&state) % (j + 1));
    if (has(t)) {
      add(static_cast<uint32_t>(j));
    } else {
      add(t);
    }
  }
  std::sort(out->begin(), out->end());
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
    for (uint32_t i = 0; i < n; ++i) m[i] = mu * m[i] + x[i];
    thread_local std::vector<float> stepped;
    if (state.nesterov) {
      stepped.resize(n);
      for (uint32_t i = 0; i < n; ++i) stepped[i] = x[i] + mu * m[i];
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
  const auto kind = static_cast<CompressorKind>(h.kind);
  if (kind == CompressorKind::kOneBit) {
    float* scales = reinterpret_cast<float*>(body);
    uint8_t* bits = reinterpret_cast<uint8_t*>(body + (uint64_t{h.cuts} + 1) * sizeof(float));
    onebit::PackSigns(c, n, bits);
    memset(bits + (n + 7) / 8, 0, OneBitSignBytes(n) - (n + 7) / 8);
    for (uint32_t s = 0; s <= h.cuts; ++s) {
      const uint32_t lo = SegmentBegin(state.cuts, s), hi = SegmentEnd(state.cuts, h.cuts, s, n);
      const float scale = static_cast<float>(onebit::AbsSum(c + lo, hi - lo) / (hi - lo));
      scales[s] = scale;
      if (!residual) continue;
      OverSegment(
          lo, hi, [&](uint32_t i) { residual[i] -= SignedAt(bits, i, scale); },
          [&](uint32_t from, uint32_t len) { onebit::SubtractSigned(residual + from, bits + from / 8, len, scale); });
    }
    return;
  }
  std::vector<uint32_t> chosen;
  if (kind == CompressorKind::kTopK) {
    TopKIndices(c, n, h.k, &chosen);
    memcpy(body, chosen.data(), chosen.size() * sizeof(uint32_t));
    body += chosen.size() * sizeof(uint32_t);
  } else {
    RandomIndices(h.seed, key, round, n, h.k, &chosen);
  }
  float* values = reinterpret_cast<float*>(body);
  for (uint32_t i = 0; i < h.k; ++i) values[i] = c[chosen[i]];
  if (residual) {
    for (uint32_t i : chosen) residual[i] = 0.0f;  // sent exactly: nothing left over
  }
}

namespace {
// A compressed payload: its header (copied out: the payload need not be
// aligned), its segment boundaries and its body; onebit's body is a float
// scale per segment, then the signs.
struct Encoded {
  CodecHeader h;
  const uint32_t* cuts;
  const char* body;
  bool onebit() const { return static_cast<CompressorKind>(h.kind) == CompressorKind::kOneBit; }
  float scale(uint32_t s) const {
    float scale;
    memcpy(&scale, body + uint64_t{s} * sizeof(float), sizeof(scale));
    return scale;
  }
  const uint8_t* signs() const {
    return reinterpret_cast<const uint8_t*>(body + (uint64_t{h.cuts} + 1) * sizeof(float));
  }
  // fn(lo, hi, scale) for each segment.
  template <typename Fn>
  void ForEachSegment(Fn fn) const {
    for (uint32_t s = 0; s <= h.cuts; ++s) fn(SegmentBegin(cuts, s), SegmentEnd(cuts, h.cuts, s, h.count), scale(s));
  }
};

Encoded Parse(const char* in) {
  Encoded e;
  memcpy(&e.h, in, sizeof(e.h));
  e.cuts = PayloadCuts(in);
  e.body = in + sizeof(e.h) + CutBytes(e.h);
  return e;
}
}  // namespace

void Decompress(const char* in, uint64_t key, uint32_t round, float* out) {
  const Encoded e = Parse(in);
  if (e.onebit()) {
    const uint8_t* bits = e.signs();
    e.ForEachSegment([&](uint32_t lo, uint32_t hi, float scale) {
      OverSegment(
          lo, hi, [&](uint32_t i) { out[i] = SignedAt(bits, i, scale); },
          [&](uint32_t from, uint32_t len) { onebit::UnpackSigns(bits + from / 8, len, scale, out + from); });
    });
    return;
  }
  memset(out, 0, uint64_t{e.h.count} * sizeof(float));
  DecompressAdd(in, key, round, out);
}

void DecompressAdd(const char* in, uint64_t key, uint32_t round, float* acc) {
  const Encoded e = Parse(in);
  if (e.onebit()) {
    const uint8_t* bits = e.signs();
    e.ForEachSegment([&](uint32_t lo, uint32_t hi, float scale) {
      OverSegment(
          lo, hi, [&](uint32_t i) { acc[i] += SignedAt(bits, i, scale); },
          [&](uint32_t from, uint32_t len) { onebit::AddSigned(acc + from, bits + from / 8, len, scale); });
    });
    return;
  }
  std::vector<uint32_t> scratch;
  const uint32_t* indices = SparseIndices(e.h, e.body, key, round, &scratch);
  const float* values = SparseValues(e.h, e.body);
  for (uint32_t i = 0; i < e.h.k; ++i) acc[indices[i]] += values[i];
}

}  // namespace bps
