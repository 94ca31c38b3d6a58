#!/usr/bin/env bash
# One link rate of issue 26's and issue 38's matrix on a GPU machine, in one
# call: a CUDA build, then benchmarks/gpu_ddp.py on emulated machines with
# NCCL's variants and byteps side by side, model by model, and byteps again
# under each extra setting given.
#
#   benchmarks/gpu_line_rate.sh MACHINES RATE REPEATS [BYTEPS_SETTING...]
#   GPU_LINE_RATE_MODELS="resnet50 vgg16" benchmarks/gpu_line_rate.sh 2 10gbit 2 "BYTEPS_TRACE_ON=1"
#
# Each BYTEPS_SETTING is one more byteps-only run per model (space-separated
# NAME=VALUE pairs, and gpu_ddp.py flags such as --cross-barrier). A setting with BYTEPS_TRACE_ON=1 traces steps 8-10 of
# every rank and server and merges them into trace_<model>_<i>.json.
# GPU_LINE_RATE_MODELS (default bert_large), GPU_LINE_RATE_STEPS (12),
# GPU_LINE_RATE_VARIANTS (default,tuned,tree,ring), GPU_LINE_RATE_NO_BUILD=1
# (already built). Logs and JSON go to $OUT (the device tool's folder) or
# out/gpu/, packed into one tarball (the device tool brings back 8 files).
# MACHINES 1 runs one machine of all GPUs over NVLink (RATE is ignored).
set -uo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO" || exit 1
MACHINES="$1"; RATE="$2"; REPEATS="$3"; shift 3
LOG="${OUT:-$REPO/out/gpu}"
RUNS="$(mktemp -d /tmp/line_rate.XXXX)"
PY="${PYTHON:-python3}"
MODELS="${GPU_LINE_RATE_MODELS:-bert_large}"
STEPS="${GPU_LINE_RATE_STEPS:-12}"
VARIANTS="${GPU_LINE_RATE_VARIANTS:-default,tuned,tree,ring}"
TAG="m${MACHINES}_${RATE}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
mkdir -p "$LOG"
pack() { tar -C "$RUNS" -czf "$LOG/line_rate_$TAG.tgz" .; }
trap pack EXIT
trap "exit 143" TERM INT

if [ -z "${GPU_LINE_RATE_NO_BUILD:-}" ]; then
  OUT="$RUNS" scripts/gpu_suite.sh --build-only >"$RUNS/build.txt" 2>&1 || { tail -40 "$RUNS/build.txt"; exit 1; }
fi
shaped_args=(--machines "$MACHINES")
ceiling=()
if [ "$MACHINES" -gt 1 ]; then
  # iproute2 for the namespaces (the image has none); carried as .gpu-tools.
  # shellcheck disable=SC1091
  source scripts/gpu_netns_tools.sh .gpu-tools/iproute2-debs
  shaped_args+=(--shaped "$RATE"); ceiling=(--ceiling)
fi
{
  sysctl net.core.rmem_max net.core.wmem_max net.ipv4.tcp_rmem net.ipv4.tcp_wmem net.ipv4.tcp_congestion_control
  nproc; nvidia-smi --query-gpu=index,name --format=csv,noheader; git -C "$REPO" log -1 --oneline 2>/dev/null
} >"$RUNS/host.txt" 2>&1

for model in $MODELS; do
  # shellcheck disable=SC2086
  "$PY" benchmarks/gpu_ddp.py "${shaped_args[@]}" "${ceiling[@]}" --models "$model" --steps "$STEPS" --warmup 4 \
    --repeats "$REPEATS" --nccl-variants "$VARIANTS" --json "$RUNS/base_$model.json" 2>&1 | tee "$RUNS/base_$model.log"
  ceiling=()  # once per call
  i=0
  for setting in "$@"; do
    i=$((i + 1))
    env_args=()
    for kv in $setting; do
      case "$kv" in --*) env_args+=("$kv") ;; *) env_args+=(--byteps-env "$kv") ;; esac
    done
    trace=""
    case " $setting " in *" BYTEPS_TRACE_ON=1 "*)
      trace="$RUNS/trace_${model}_$i"; rm -rf "$trace"
      env_args+=(--byteps-env "BYTEPS_TRACE_DIR=$trace" --byteps-env BYTEPS_TRACE_START_STEP=8
                 --byteps-env BYTEPS_TRACE_END_STEP=10) ;;
    esac
    echo "== $model: byteps with $setting"
    "$PY" benchmarks/gpu_ddp.py "${shaped_args[@]}" --models "$model" --steps "$STEPS" --warmup 4 \
      --byteps-only "${env_args[@]}" --json "$RUNS/setting${i}_$model.json" 2>&1 | tee "$RUNS/setting${i}_$model.log"
    if [ -n "$trace" ] && [ -d "$trace" ]; then
      "$PY" -m byteps_native.trace merge "$trace" -o "$trace.json" && rm -rf "$trace"
    fi
  done
done
