#!/usr/bin/env bash
# Issue 26's runs of one layout on a GPU machine, in one call: a CUDA build,
# then benchmarks/gpu_ddp.py on emulated machines with NCCL's variants and
# byteps side by side, and byteps again under each extra setting given.
#
#   benchmarks/gpu_line_rate.sh MACHINES RATE REPEATS [BYTEPS_SETTING...]
#   benchmarks/gpu_line_rate.sh 2 25gbit 1 "BYTEPS_TCP_SOCKET_BUFFER=0" "BYTEPS_SCHEDULING_CREDIT=16"
#
# Each BYTEPS_SETTING is one more byteps-only run (space-separated NAME=VALUE
# pairs). GPU_LINE_RATE_MODELS (default bert_large), GPU_LINE_RATE_STEPS
# (12), GPU_LINE_RATE_VARIANTS (default,tuned,tree,ring). Logs and JSON go to
# $OUT (the device tool's folder) or out/gpu/, packed into one tarball.
set -uo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
MACHINES="$1"; RATE="$2"; REPEATS="$3"; shift 3
LOG="${OUT:-$REPO/out/gpu}"
mkdir -p "$LOG/runs"
PY="${PYTHON:-python3}"
MODELS="${GPU_LINE_RATE_MODELS:-bert_large}"
STEPS="${GPU_LINE_RATE_STEPS:-12}"
VARIANTS="${GPU_LINE_RATE_VARIANTS:-default,tuned,tree,ring}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1

if [ -z "${GPU_LINE_RATE_NO_BUILD:-}" ]; then
  scripts/gpu_suite.sh --build-only >"$LOG/runs/build.txt" 2>&1 || { tail -40 "$LOG/runs/build.txt"; exit 1; }
fi
# iproute2 for the namespaces (the image has none); carried as .gpu-tools.
# shellcheck disable=SC1091
source scripts/gpu_netns_tools.sh .gpu-tools/iproute2-debs
{
  sysctl net.core.rmem_max net.core.wmem_max net.ipv4.tcp_rmem net.ipv4.tcp_wmem net.ipv4.tcp_congestion_control
  nproc; nvidia-smi --query-gpu=index,name --format=csv,noheader
} >"$LOG/runs/host.txt" 2>&1

shaped_args=(--machines "$MACHINES")
ceiling=()
if [ "$MACHINES" -gt 1 ]; then shaped_args+=(--shaped "$RATE"); ceiling=(--ceiling); fi
# shellcheck disable=SC2086
"$PY" benchmarks/gpu_ddp.py "${shaped_args[@]}" "${ceiling[@]}" --models $MODELS --steps "$STEPS" --warmup 4 \
  --repeats "$REPEATS" --nccl-variants "$VARIANTS" --json "$LOG/runs/base.json" 2>&1 | tee "$LOG/runs/base.log"
i=0
for setting in "$@"; do
  i=$((i + 1))
  env_args=()
  for kv in $setting; do env_args+=(--byteps-env "$kv"); done
  echo "== byteps with $setting"
  # shellcheck disable=SC2086
  "$PY" benchmarks/gpu_ddp.py "${shaped_args[@]}" --models $MODELS --steps "$STEPS" --warmup 4 \
    --byteps-only "${env_args[@]}" --json "$LOG/runs/setting$i.json" 2>&1 | tee "$LOG/runs/setting$i.log"
done
tar -C "$LOG" -czf "$LOG/line_rate_runs.tgz" runs
