// Dumps what the compressors write for fixed inputs (payloads, residuals,
// momentum, decodes, descriptions, refusals) so two trees can be compared
// byte by byte: tests/cpp/compression_wire_compat.sh builds it against a
// git revision and against this tree and compares the dumps. Not a gtest
// (it needs two builds); the refactor to self-registering codecs was
// checked with it against c68038f (identical, 72 MB).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>
#include "compression/compressor.h"
using namespace bps;
int main() {
  const char* specs[] = {"onebit", "onebit:ef=0", "onebit:momentum=0.9", "onebit:momentum=0.9,nesterov=0,server_ef=1",
                         "topk:ratio=0.01", "topk:ratio=0.5,ef=0", "topk:ratio=0.001,momentum=0.9", "topk:ratio=0.01,server_topk=1",
                         "randomk:ratio=0.01,seed=3", "randomk:ratio=0.3,seed=0,ef=0", "randomk:ratio=0.05,seed=9,momentum=0.5"};
  FILE* out = stdout;
  for (const char* text : specs) {
    for (uint32_t n : {1u, 7u, 33u, 1000u, 65541u}) {
      for (int ties = 0; ties < 2; ++ties) {
        CompressionSpec spec;
        if (!ParseCompressionSpec(text, &spec).ok()) return 1;
        if (n > 100) spec.segment_ends = std::make_shared<const std::vector<uint64_t>>(std::vector<uint64_t>{3, 50, n / 2, uint64_t{n} + 17});
        std::vector<uint32_t> cuts = SliceCuts(spec, 10, n);
        CodecHeader h = MakeCodecHeader(spec, n, cuts.size());
        fprintf(out, "%s n=%u ties=%d %s | %s | bytes %llu answer %llu\n", text, n, ties, DescribeSpec(spec).c_str(), DescribeCodec(h).c_str(),
                (unsigned long long)CompressedBytes(h), (unsigned long long)CompressedBytes(AnswerCodec(h, 3)));
        std::vector<float> residual(n, 0.0f), momentum(n, 0.0f);
        SliceState st; st.residual = spec.error_feedback ? residual.data() : nullptr; st.momentum = spec.momentum > 0 ? momentum.data() : nullptr;
        st.mu = (float)spec.momentum; st.nesterov = spec.nesterov; st.cuts = cuts.data();
        std::mt19937 rng(n * 7 + ties);
        std::normal_distribution<float> d(0, 1);
        std::vector<char> wire(CompressedBytes(h));
        for (uint32_t round = 0; round < 3; ++round) {
          std::vector<float> x(n);
          for (auto& v : x) { v = d(rng); if (ties) v = std::round(v * 4) / 4; }
          Compress(h, x.data(), st, 100 + n, round, wire.data());
          fwrite(wire.data(), 1, wire.size(), out);
          fwrite(residual.data(), 4, n, out);
          fwrite(momentum.data(), 4, n, out);
          std::vector<float> dec(n), acc(n, 0.5f);
          Decompress(wire.data(), 100 + n, round, dec.data());
          DecompressAdd(wire.data(), 100 + n, round, acc.data());
          fwrite(dec.data(), 4, n, out);
          fwrite(acc.data(), 4, n, out);
          fprintf(out, "[%s]\n", ValidateCompressed(wire.data(), wire.size()).c_str());
        }
      }
    }
  }
  CompressionSpec spec;
  for (const char* bad : {"twobit", "onebit:ratio=0.1", "topk:seed=1", "randomk:server_topk=1", "none:x=1"})
    fprintf(out, "%s\n", ParseCompressionSpec(bad, &spec).message().c_str());
  return 0;
}
