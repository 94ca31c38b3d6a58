#!/usr/bin/env bash
# Builds and runs the topk selection benchmark (benchmarks/topk_select_bench.cc)
# with the engine's compile flags (-O3 -march=x86-64-v2).
#
#   benchmarks/topk_select_bench.sh
#
# Output: one line per input kind, slice size and ratio, in CPU ms per MB of
# float32 input, old (nth_element) and new (radix select); exits non-zero if
# they ever choose different indices. docs/compression.md keeps the numbers.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/build/topk_select_bench"
CXX="${CXX:-g++}"
mkdir -p "$OUT"
"$CXX" -std=c++17 -O3 -march=x86-64-v2 -I"$ROOT/csrc" "$ROOT/benchmarks/topk_select_bench.cc" \
  "$ROOT/csrc/compression/topk_select.cc" -o "$OUT/bench"
exec "$OUT/bench"
