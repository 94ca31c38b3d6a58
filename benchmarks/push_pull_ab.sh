#!/usr/bin/env bash
# benchmarks/push_pull.py on two builds side by side, rounds alternating
# (A, B, A, B, ...), so that both see the same machine at the same minutes;
# then the median of every figure per side and B's over A's. For "no figure
# regresses against the previous commit" (issue 28).
#
#   benchmarks/push_pull_ab.sh A_TREE B_TREE ROUNDS [push_pull.py arguments]
#   benchmarks/push_pull_ab.sh /tmp/base . 5 --workers 2 --machines 2 --servers 2
#
# Each tree is a source tree (a `git archive` of the older commit will do),
# built in place once (`setup.py build_ext --inplace`, with this Python and
# its torch; PUSH_PULL_AB_REBUILD=1 builds again) and run with PYTHONPATH set
# to it, so neither side needs an install. Logs and JSON go to $OUT or out/ab/.
set -uo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
A="$(cd "$1" && pwd)"; B="$(cd "$2" && pwd)"; ROUNDS="$3"; shift 3
LOG="${OUT:-$REPO/out/ab}"
mkdir -p "$LOG"
PY="${PYTHON:-python3}"

build() {
  local tree="$1" log="$LOG/build-$(basename "$1").log"
  if ! ls "$tree"/byteps_native/lib/libbyteps_engine.so >/dev/null 2>&1 || [ -n "${PUSH_PULL_AB_REBUILD:-}" ]; then
    (cd "$tree" && "$PY" setup.py -q build_ext --inplace) >"$log" 2>&1 || { tail -30 "$log" >&2; return 1; }
  fi
  # This side imports its own tree, not an installed byteps-native.
  (cd / && PYTHONPATH="$tree" "$PY" -c "import byteps_native; print('$tree ->', byteps_native.__file__)")
}
build "$A" || exit 1
build "$B" || exit 1

for round in $(seq 1 "$ROUNDS"); do
  for side in A B; do
    if [ "$side" = A ]; then tree="$A"; else tree="$B"; fi
    echo "== round $round $side ($tree) $(uptime | sed 's/.*load/load/')"
    # The tree's own benchmark, which launches the job with this Python.
    (cd "$tree" && PYTHONPATH="$tree" "$PY" benchmarks/push_pull.py "$@" \
      --json "$LOG/$side-$round.json") >"$LOG/$side-$round.log" 2>&1 || { echo "failed:"; tail -20 "$LOG/$side-$round.log"; }
  done
done

"$PY" - "$LOG" "$ROUNDS" <<'EOF'
import glob, json, os, statistics, sys
log, rounds = sys.argv[1], int(sys.argv[2])
runs = {side: [json.load(open(f))["rows"] for f in sorted(glob.glob(os.path.join(log, f"{side}-*.json")))]
        for side in "AB"}
print(f"medians of {len(runs['A'])} (A) and {len(runs['B'])} (B) alternating rounds")
print(f"{'size':>8} {'A GB/s':>8} {'B GB/s':>8} {'B/A':>6}   {'A/gloo':>7} {'B/gloo':>7}   {'A cpu s/GB':>10} {'B cpu s/GB':>10}")
for i, row in enumerate(runs["A"][0]):
    med = {side: {k: statistics.median(r[i][k] for r in runs[side])
                  for k in ("byteps_GBps", "ratio", "byteps_cpu_s_per_GB")} for side in "AB"}
    print(f"{row['bytes'] >> 20:>6}MB {med['A']['byteps_GBps']:>8.2f} {med['B']['byteps_GBps']:>8.2f} "
          f"{med['B']['byteps_GBps'] / med['A']['byteps_GBps']:>6.2f}   {med['A']['ratio']:>6.2f}x {med['B']['ratio']:>6.2f}x"
          f"   {med['A']['byteps_cpu_s_per_GB']:>10.2f} {med['B']['byteps_cpu_s_per_GB']:>10.2f}")
EOF
