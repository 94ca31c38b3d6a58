#!/usr/bin/env bash
# Session 8 (one H200), issue 38: a single-rank machine issues its device
# steps in priority order. tests/gpu (the one-rank device path), a traced
# cross-barrier VGG-16 (when features.0 is first pushed against submitted),
# then cross-barrier and plain runs, byteps only, shared GPU, 10 Gbit/s.
set -o pipefail
rm -rf /tmp/w && cp -r . /tmp/w && cd /tmp/w || exit 1
export BYTEPS_TIMEOUT=30 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
OUT=/tmp/build scripts/gpu_suite.sh --build-only > /tmp/build.txt 2>&1 || { tail -40 /tmp/build.txt; exit 1; }
el built
timeout -s TERM 100 python3 -m pytest -q -rs tests/gpu -p no:cacheprovider -x > $OUT/gpu_tests.txt 2>&1
el "tests/gpu rc $?"; grep -E "passed|failed|FAILED|Error" $OUT/gpu_tests.txt | tail -4
source scripts/gpu_netns_tools.sh .gpu-tools/iproute2-debs > /tmp/netns.txt 2>&1
mkdir -p /tmp/runs
run() {  # name model extra-args...
  local name=$1 model=$2; shift 2
  timeout -s TERM 60 python3 benchmarks/gpu_ddp.py --gpus 2 --machines 2 --shaped 10gbit --models $model --steps 10 \
    --warmup 4 --byteps-only "$@" --json /tmp/runs/$name.json > /tmp/runs/$name.txt 2>&1
  el "$name rc $?"; grep -E "inside a step|steady" /tmp/runs/$name.txt | tail -2
}
T=/tmp/runs/trace_vgg16_cb
run vgg16_cb_trace vgg16 --cross-barrier --byteps-env BYTEPS_TRACE_ON=1 --byteps-env BYTEPS_TRACE_DIR=$T \
  --byteps-env BYTEPS_TRACE_START_STEP=8 --byteps-env BYTEPS_TRACE_END_STEP=10
python3 -m byteps_native.trace merge $T -o $T.json > /tmp/runs/merge.txt 2>&1 && gzip $T.json && rm -rf $T
tar -C /tmp/runs -czf $OUT/runs.tgz .
for spec in vgg16_cb:vgg16:--cross-barrier vgg16_plain:vgg16: resnet50_cb:resnet50:--cross-barrier; do
  [ $(( $(date +%s) - T0 )) -lt 270 ] || break
  IFS=: read -r name model extra <<< "$spec"
  run $name $model $extra
  tar -C /tmp/runs -czf $OUT/runs.tgz .
done
el done
