#!/usr/bin/env bash
# Builds and runs the servers' topk sum benchmark (benchmarks/topk_sum_bench.cc)
# with the engine's compile flags (-O3 -march=x86-64-v2): dense decode and
# re-selection against the sparse merge, CPU ms per MB of slice.
#
#   benchmarks/topk_sum_bench.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/build/topk_sum_bench"
CXX="${CXX:-g++}"
mkdir -p "$OUT"
"$CXX" -std=c++17 -O3 -march=x86-64-v2 -I"$ROOT/csrc" "$ROOT/benchmarks/topk_sum_bench.cc" \
  "$ROOT"/csrc/compression/*.cc "$ROOT"/csrc/common/logging.cc -o "$OUT/bench" -lpthread
exec "$OUT/bench"
