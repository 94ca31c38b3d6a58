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

bool ParseDouble(const std::string& text, double* v) {
  if (text.empty()) return false;
  char* end = nullptr;
  *v = strtod(text.c_str(), &end);
  return end && *end == '\0';
}

// Whole 32-bit words of sign bits: float32 frames carry multiples of 4 bytes.
uint64_t OneBitSignBytes(uint64_t n) { return (n + 31) / 32 * 4; }
uint64_t OneBitBodyBytes(uint64_t n) { return sizeof(float) + OneBitSignBytes(n); }

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
      "(ratio=<0..0.5>, seed=<int>, ef=<0|1>, momentum=<0..1>, nesterov=<0|1>, server_ef=<0|1>), e.g. 'topk:ratio=0.01' "
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
  return text;
}

CodecHeader MakeCodecHeader(const CompressionSpec& spec, uint64_t count) {
  CodecHeader h;
  h.kind = static_cast<uint8_t>(spec.kind);
  h.options = spec.error_feedback ? kOptionErrorFeedback : 0;
  if (spec.momentum > 0) h.options |= spec.nesterov ? kOptionMomentum | kOptionNesterov : kOptionMomentum;
  if (spec.server_error_feedback) h.options |= kOptionServerErrorFeedback;
  h.count = static_cast<uint32_t>(count);
  if (spec.kind == CompressorKind::kTopK || spec.kind == CompressorKind::kRandomK) {
    const double k = std::floor(static_cast<double>(count) * spec.ratio);
    h.k = static_cast<uint32_t>(std::max(1.0, std::min(k, static_cast<double>(count))));
  }
  if (spec.kind == CompressorKind::kRandomK) h.seed = spec.seed;
  return h;
}

bool ServerErrorFeedback(const CodecHeader& h) { return (h.options & kOptionServerErrorFeedback) != 0; }

uint64_t CompressedBytes(const CodecHeader& h) {
  switch (static_cast<CompressorKind>(h.kind)) {
    case CompressorKind::kOneBit: return sizeof(CodecHeader) + OneBitBodyBytes(h.count);
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
  text += (h.options & kOptionErrorFeedback) ? " with error feedback" : " without error feedback";
  if (h.options & kOptionMomentum) {
    text += (h.options & kOptionNesterov) ? " and nesterov momentum" : " and momentum";
  }
  if (h.options & kOptionServerErrorFeedback) text += ", server error feedback";
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
  if (CompressedBytes(h) != payload_bytes) {
    return DescribeCodec(h) + " of " + std::to_string(h.count) + " elements takes " +
           std::to_string(CompressedBytes(h)) + " bytes, the push carried " + std::to_string(payload_bytes);
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

void Compress(const CodecHeader& h, const float* x, const SliceState& state, uint64_t key, uint32_t round,
              char* out) {
  memcpy(out, &h, sizeof(h));
  char* body = out + sizeof(h);
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
    const float scale = static_cast<float>(onebit::AbsSum(c, n) / n);
    memcpy(body, &scale, sizeof(scale));
    uint8_t* bits = reinterpret_cast<uint8_t*>(body + sizeof(float));
    onebit::PackSigns(c, n, bits);
    memset(bits + (n + 7) / 8, 0, OneBitSignBytes(n) - (n + 7) / 8);
    if (residual) onebit::SubtractSigned(residual, bits, n, scale);
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
// aligned) and its body; onebit's body is a float scale, then the signs.
struct Encoded {
  CodecHeader h;
  const char* body;
  bool onebit() const { return static_cast<CompressorKind>(h.kind) == CompressorKind::kOneBit; }
  float scale() const {
    float scale;
    memcpy(&scale, body, sizeof(scale));
    return scale;
  }
  const uint8_t* signs() const { return reinterpret_cast<const uint8_t*>(body + sizeof(float)); }
};

Encoded Parse(const char* in) {
  Encoded e;
  memcpy(&e.h, in, sizeof(e.h));
  e.body = in + sizeof(e.h);
  return e;
}
}  // namespace

void Decompress(const char* in, uint64_t key, uint32_t round, float* out) {
  const Encoded e = Parse(in);
  if (e.onebit()) {
    onebit::UnpackSigns(e.signs(), e.h.count, e.scale(), out);
    return;
  }
  memset(out, 0, uint64_t{e.h.count} * sizeof(float));
  DecompressAdd(in, key, round, out);
}

void DecompressAdd(const char* in, uint64_t key, uint32_t round, float* acc) {
  const Encoded e = Parse(in);
  if (e.onebit()) {
    onebit::AddSigned(acc, e.signs(), e.h.count, e.scale());
    return;
  }
  std::vector<uint32_t> scratch;
  const uint32_t* indices = SparseIndices(e.h, e.body, key, round, &scratch);
  const float* values = SparseValues(e.h, e.body);
  for (uint32_t i = 0; i < e.h.k; ++i) acc[indices[i]] += values[i];
}

}  // namespace bps
