#!/usr/bin/env bash
# benchmarks/push_pull.py on two builds side by side, rounds alternating
# (A, B, A, B, ...), so that both see the same machine at the same minutes;
# then the median of every figure per side and B's over A's. For "no figure
# regresses against the previous commit" (issue 28).
#
#   benchmarks/push_pull_ab.sh A_TREE B_TREE ROUNDS [push_pull.py arguments]
#   benchmarks/push_pull_ab.sh /tmp/base . 5 --workers 2 --machines 2 --servers 2
#
# Each tree is a source tree (a `git archive` of the older commit will do);
# each is built once into a virtualenv of its own that sees this Python's
# packages (torch), unless it already has one (PUSH_PULL_AB_REBUILD=1 forces
# it). Logs and JSON go to $OUT or out/ab/.
set -uo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
A="$(cd "$1" && pwd)"; B="$(cd "$2" && pwd)"; ROUNDS="$3"; shift 3
LOG="${OUT:-$REPO/out/ab}"
mkdir -p "$LOG"
PY="${PYTHON:-python3}"

build() {  # tree -> its virtualenv's python
  local tree="$1" venv="$1/.ab-venv"
  if [ ! -x "$venv/bin/python" ] || [ -n "${PUSH_PULL_AB_REBUILD:-}" ]; then
    "$PY" -m venv --system-site-packages "$venv" || return 1
    (cd "$tree" && "$venv/bin/python" -m pip install -q --no-build-isolation --no-deps -e .) \
      >"$LOG/build-$(basename "$tree").log" 2>&1 || { tail -30 "$LOG/build-$(basename "$tree").log" >&2; return 1; }
  fi
  echo "$venv/bin/python"
}
PY_A="$(build "$A")" || exit 1
PY_B="$(build "$B")" || exit 1
for py in "$PY_A" "$PY_B"; do  # each side imports its own tree
  (cd / && "$py" -c "import byteps_native, sys; print(sys.argv[1], '->', byteps_native.__file__)" "$py")
done

for round in $(seq 1 "$ROUNDS"); do
  for side in A B; do
    if [ "$side" = A ]; then tree="$A"; py="$PY_A"; else tree="$B"; py="$PY_B"; fi
    echo "== round $round $side ($tree) $(uptime | sed 's/.*load/load/')"
    # The tree's own benchmark and launcher (bpslaunch from its virtualenv).
    (cd "$tree" && PATH="$(dirname "$py"):$PATH" "$py" benchmarks/push_pull.py "$@" \
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
