#!/usr/bin/env bash
# Issue 25's GPU fault check: a 2 x 2 (emulated machines x GPUs) BERT-large
# DDP job, BYTEPS_TIMEOUT=30, and one process killed with SIGKILL at a random
# moment of training. Per trial: the victim, seconds from the kill until
# every process of the job exited on its own (the harness kills only after
# --timeout 150 s: a rank spinning in an NCCL kernel shows as ~150 s), the
# first error line of each survivor's log, /dev/shm files left.
#
#   source scripts/gpu_netns_tools.sh .gpu-tools/iproute2-debs
#   benchmarks/gpu_fault_trials.sh LOGS ROLE...      # ROLE: worker | server | scheduler
set -uo pipefail
logs="$1"; shift
PY="${PYTHON:-python3}"
n=0
for role in "$@"; do
  n=$((n + 1)); dir="$logs/trial$n-$role"; mkdir -p "$dir"
  "$PY" benchmarks/gpu_ddp.py --machines 2 --shaped none --models bert_large --steps 400 --byteps-only \
    --byteps-env BYTEPS_TIMEOUT=30 --timeout 150 --logdir "$dir" >"$dir/stdout.log" 2>&1 &
  job=$!
  # Into training: past start-up (~15 s), a random moment.
  sleep $((16 + RANDOM % 8))
  case "$role" in
    worker) victim=$(pgrep -f "gpu_ddp.py --worker" | shuf -n1) ;;
    server) victim=$(pgrep -f "byteps_native.server" | shuf -n1) ;;
    scheduler) victim=$(pgrep -f "byteps_native.scheduler" | head -1) ;;
  esac
  killed=$(date +%s.%N)
  kill -9 "$victim"
  wait "$job"; rc=$?
  gone=$(date +%s.%N)
  left=$(ls /dev/shm | grep -c bpsn- || true)
  echo "trial $n: killed $role (pid $victim); job exited rc=$rc $("$PY" -c "print(round($gone - $killed, 1))") s" \
    "after the kill; /dev/shm files left: $left"
  for f in "$dir"/*.log; do
    line=$(grep -m1 -E "ERROR|Error|error" "$f" | cut -c1-260)
    [ -n "$line" ] && echo "    $(basename "$f"): $line"
  done
  rm -f /dev/shm/bpsn-* 2>/dev/null
done
