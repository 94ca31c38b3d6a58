#!/usr/bin/env bash
# Builds and runs the summation-kernel benchmark (benchmarks/reduce_kernels_bench.cc)
# with the engine's compile flags (-O3 -march=x86-64-v2).
#
#   benchmarks/reduce_kernels_bench.sh              # this tree, every level the CPU runs
#   benchmarks/reduce_kernels_bench.sh REV          # also git revision REV's kernels first, as "before"
#
# Output: one line per level, dtype, kernel and size, in GB/s of input bytes.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/build/reduce_kernels_bench"
CXX="${CXX:-g++}"
FLAGS=(-std=c++17 -O3 -march=x86-64-v2 -pthread)
mkdir -p "$OUT"
if [ $# -ge 1 ]; then
  # The revision's csrc/common, compiled with this benchmark.
  OLD="$OUT/rev-$1"
  rm -rf "$OLD" && mkdir -p "$OLD/csrc"
  git -C "$ROOT" archive "$1" csrc/common csrc/c_api | tar -x -C "$OLD"
  OLD_SOURCES=("$OLD"/csrc/common/reduce_kernels*.cc)
  "$CXX" "${FLAGS[@]}" -I"$OLD/csrc" "$ROOT/benchmarks/reduce_kernels_bench.cc" "${OLD_SOURCES[@]}" \
    -o "$OUT/bench_rev"
  "$OUT/bench_rev" "before"
fi
"$CXX" "${FLAGS[@]}" -I"$ROOT/csrc" "$ROOT/benchmarks/reduce_kernels_bench.cc" \
  "$ROOT"/csrc/common/reduce_kernels*.cc -o "$OUT/bench"
exec "$OUT/bench"
