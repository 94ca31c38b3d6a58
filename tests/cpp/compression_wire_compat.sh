#!/usr/bin/env bash
# Checks that this tree's compressors write what revision REV's wrote, byte
# for byte: payloads, error-feedback residuals, worker momentum, decodes,
# descriptions and refusals for fixed inputs (tests/cpp/compression_wire_dump.cc).
#
#   tests/cpp/compression_wire_compat.sh REV     # e.g. origin/main
#
# Exits 0 when identical. REV must have the same public face
# (csrc/compression/compressor.h).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
REV="${1:?usage: $0 REV}"
OUT="$ROOT/build/compression_wire_compat"
CXX="${CXX:-g++}"
FLAGS=(-std=c++17 -O2 -march=x86-64-v2)
rm -rf "$OUT" && mkdir -p "$OUT/rev"
git -C "$ROOT" archive "$REV" csrc/compression csrc/common | tar -x -C "$OUT/rev"
"$CXX" "${FLAGS[@]}" -I"$OUT/rev/csrc" "$ROOT/tests/cpp/compression_wire_dump.cc" "$OUT"/rev/csrc/compression/*.cc \
  -o "$OUT/dump_rev"
"$CXX" "${FLAGS[@]}" -I"$ROOT/csrc" "$ROOT/tests/cpp/compression_wire_dump.cc" "$ROOT"/csrc/compression/*.cc \
  -o "$OUT/dump_tree"
"$OUT/dump_rev" > "$OUT/rev.bin"
"$OUT/dump_tree" > "$OUT/tree.bin"
if cmp -s "$OUT/rev.bin" "$OUT/tree.bin"; then
  echo "identical to $REV ($(stat -c %s "$OUT/tree.bin") bytes of output)"
else
  echo "differs from $REV: $(cmp "$OUT/rev.bin" "$OUT/tree.bin" || true)" >&2
  exit 1
fi
