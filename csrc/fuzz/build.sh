#!/usr/bin/env bash
# Builds the libFuzzer harnesses of csrc/fuzz/ with AddressSanitizer and
# UndefinedBehaviorSanitizer, linking the engine sources they exercise
# directly (setup.py never compiles this folder).
#
#   csrc/fuzz/build.sh [out_dir]        # default: build/fuzz
#
# Needs clang++ with libFuzzer (Debian/Ubuntu: apt-get install -y clang).
# A harness is rebuilt only when a source or header is newer than it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${1:-$ROOT/build/fuzz}"
CXX="${FUZZ_CXX:-clang++}"
mkdir -p "$OUT"

FLAGS=(-std=c++17 -g -O1 -fno-omit-frame-pointer -pthread -I"$ROOT/csrc"
       -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)
COMMON=(common/logging.cc common/net_util.cc common/sha256.cc common/config.cc common/job_verdict.cc)

declare -A HARNESS_SOURCES=(
  [frame_decoder_fuzz]="transport/framing.cc ps/protocol.cc transport/tcp/framed_socket.cc transport/tcp/event_loop.cc"
  [handshake_store_fuzz]="transport/framing.cc transport/factory.cc transport/tcp/tcp_transport.cc transport/tcp/framed_socket.cc transport/tcp/handshake.cc transport/tcp/handshake_acceptor.cc transport/tcp/event_loop.cc store/memory_store.cc store/tcp_store.cc store/job_secret.cc"
)

# Seconds since the epoch of the newest of the given files and of the
# headers of the layers the harnesses link (other layers do not matter).
newest() {
  find "$@" "$ROOT/csrc/common" "$ROOT/csrc/transport" "$ROOT/csrc/ps" "$ROOT/csrc/store" "$ROOT/csrc/fuzz" "$ROOT/csrc/c_api" \
    \( -name '*.h' -o -name '*.cc' -o -name build.sh \) -printf '%T@\n' | sort -n | tail -1 | cut -d. -f1
}

pids=()
for name in "${!HARNESS_SOURCES[@]}"; do
  bin="$OUT/$name"
  srcs=("$ROOT/csrc/fuzz/$name.cc")
  for s in "${COMMON[@]}" ${HARNESS_SOURCES[$name]}; do srcs+=("$ROOT/csrc/$s"); done
  if [[ -x "$bin" && "$(stat -c %Y "$bin")" -gt "$(newest "${srcs[@]}")" ]]; then
    echo "up to date: $bin"
    continue
  fi
  echo "building $bin"
  ("$CXX" "${FLAGS[@]}" "${srcs[@]}" -o "$bin.tmp" && mv "$bin.tmp" "$bin") &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
