#!/usr/bin/env bash
# Builds and runs the transport microbenchmark (benchmarks/transport_bench.cc):
# one sender, one receiver, 4 KB-64 MB messages, 1-8 connections.
#
#   benchmarks/transport_bench.sh [HOST] [BYTES_PER_POINT]   # default 127.0.0.1 2e9
#
# Compiles the transport and the few engine files it needs straight from
# csrc/ into build/transport_bench (a rebuild only when a source changed).
# On hosts whose exported CXX links libstdc++ statically (the GPU image),
# set CXX to Python's compiler as scripts/gpu_suite.sh does.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/build/transport_bench"
CXX="${CXX:-g++}"
mkdir -p "$OUT"
SOURCES=("$ROOT/benchmarks/transport_bench.cc")
for f in common/logging.cc common/net_util.cc common/sha256.cc common/config.cc common/job_verdict.cc \
         transport/*.cc transport/tcp/*.cc ps/*.cc store/job_secret.cc; do
  for g in "$ROOT"/csrc/$f; do SOURCES+=("$g"); done
done
BIN="$OUT/transport_bench"
newest=$(find "$ROOT/csrc" "$ROOT/benchmarks/transport_bench.cc" -name '*.h' -o -name '*.cc' -printf '%T@\n' |
         sort -n | tail -1 | cut -d. -f1)
if [ ! -x "$BIN" ] || [ "$(stat -c %Y "$BIN")" -lt "$newest" ]; then
  "$CXX" -std=c++17 -O2 -pthread -I"$ROOT/csrc" "${SOURCES[@]}" -o "$BIN"
fi
exec "$BIN" "$@"
