#!/usr/bin/env bash
# Issue 25's stall check: N runs of the 2 x 2 (emulated machines x GPUs)
# BERT-large-sized DDP job, unshaped namespaces, byteps only, BYTEPS_TIMEOUT=30
# so a stall costs seconds. Prints one line per run and a count; keeps every
# run's worker and server logs under $LOGS/run<i>/.
#
#   source scripts/gpu_netns_tools.sh .gpu-tools/iproute2-debs
#   benchmarks/gpu_2x2_stability.sh RUNS LOGS [extra gpu_ddp.py args...]
set -uo pipefail
runs="$1"; logs="$2"; shift 2
PY="${PYTHON:-python3}"
ok=0
for i in $(seq 1 "$runs"); do
  mkdir -p "$logs/run$i"
  start=$(date +%s)
  if timeout 240 "$PY" benchmarks/gpu_ddp.py --machines 2 --shaped none --models bert_large --steps 10 \
      --byteps-only --byteps-env BYTEPS_TIMEOUT=30 --timeout 200 --logdir "$logs/run$i" \
      --json "$logs/run$i/result.json" "$@" >"$logs/run$i/stdout.log" 2>&1; then
    ok=$((ok + 1))
    echo "run $i: completed in $(( $(date +%s) - start )) s: $(grep -o '"samples_per_s": [0-9.]*' "$logs/run$i/stdout.log" | head -1)"
  else
    echo "run $i: FAILED after $(( $(date +%s) - start )) s: $(grep -h -m1 -E 'waited for|Error|error' "$logs/run$i"/*.log 2>/dev/null | head -c 400)"
  fi
done
echo "completed $ok of $runs"
