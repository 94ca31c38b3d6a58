#!/usr/bin/env bash
# MSG_ZEROCOPY against plain send() on loopback and on a veth pair between two
# network namespaces (as root for the veth part); see zerocopy_probe.cc.
#
#   benchmarks/zerocopy_probe.sh [BYTES]      # default 2e9 per point
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/build/zerocopy_probe"
BYTES="${1:-2000000000}"
mkdir -p "$OUT"
"${CXX:-g++}" -std=c++17 -O2 "$ROOT/benchmarks/zerocopy_probe.cc" -o "$OUT/probe"
P="$OUT/probe"

run_points() {  # $1: prefix command for the sender, $2: receiver address, $3: port
  for chunk in 65536 1048576 4194304; do
    for mode in copy zerocopy; do $1 "$P" send "$2" "$3" "$BYTES" "$chunk" "$mode"; done
  done
}

echo "# loopback"
"$P" recv 47311 & SINK=$!
trap 'kill $SINK 2>/dev/null || true' EXIT
sleep 0.3
run_points "" 127.0.0.1 47311
kill $SINK; wait $SINK 2>/dev/null || true

if [ "$(id -u)" = 0 ] && command -v ip >/dev/null; then
  echo "# veth between two namespaces"
  A="zcp-$$-a" B="zcp-$$-b"
  ip netns add "$A"; ip netns add "$B"
  trap 'kill $SINK 2>/dev/null || true; ip netns del "$A" 2>/dev/null || true; ip netns del "$B" 2>/dev/null || true' EXIT
  ip link add v0 netns "$A" type veth peer name v1 netns "$B"
  ip -n "$A" addr add 192.0.2.1/24 dev v0; ip -n "$A" link set v0 up; ip -n "$A" link set lo up
  ip -n "$B" addr add 192.0.2.2/24 dev v1; ip -n "$B" link set v1 up; ip -n "$B" link set lo up
  ip netns exec "$A" "$P" recv 47312 & SINK=$!
  sleep 0.3
  run_points "ip netns exec $B" 192.0.2.1 47312
fi
