#!/usr/bin/env bash
# Session 8 (one H200), issue 38 item 3: cross-barrier with priorities on and
# off, byteps only on the shared GPU (both emulated machines on it), 10 Gbit/s:
# plain DDP, cross-barrier, cross-barrier without the window
# (BYTEPS_SCHEDULING_CREDIT=0), cross-barrier with every priority equal
# (BENCH_FLAT_PRIORITY=1); then a traced cross-barrier VGG-16 (steps 8-10):
# when each layer's sum arrives against when the next forward needs it.
set -o pipefail
rm -rf /tmp/w && cp -r . /tmp/w && cd /tmp/w || exit 1
export BYTEPS_TIMEOUT=30 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
OUT=/tmp/build scripts/gpu_suite.sh --build-only > /tmp/build.txt 2>&1 || { tail -40 /tmp/build.txt; exit 1; }
el built
source scripts/gpu_netns_tools.sh .gpu-tools/iproute2-debs > /tmp/netns.txt 2>&1
mkdir -p /tmp/runs
run() {  # name model extra-args...
  local name=$1 model=$2; shift 2
  timeout -s TERM 100 python3 benchmarks/gpu_ddp.py --gpus 2 --machines 2 --shaped 10gbit --models $model --steps 10 \
    --warmup 4 --byteps-only "$@" --json /tmp/runs/$name.json > /tmp/runs/$name.txt 2>&1
  el "$name rc $?"; grep -E "used|inside a step|GPU clock|byteps +[0-9]|pacing" /tmp/runs/$name.txt | tail -5
}
T=/tmp/runs/trace_vgg16_cb
run vgg16_cb_trace vgg16 --cross-barrier --byteps-env BYTEPS_TRACE_ON=1 --byteps-env BYTEPS_TRACE_DIR=$T \
  --byteps-env BYTEPS_TRACE_START_STEP=8 --byteps-env BYTEPS_TRACE_END_STEP=10
python3 -m byteps_native.trace merge $T -o $T.json > /tmp/runs/merge.txt 2>&1 && gzip $T.json && rm -rf $T
for rep in 1 2; do
  run vgg16_plain_$rep vgg16
  run vgg16_cb_$rep vgg16 --cross-barrier
  run vgg16_cb_nocredit_$rep vgg16 --cross-barrier --byteps-env BYTEPS_SCHEDULING_CREDIT=0
  run vgg16_cb_flat_$rep vgg16 --cross-barrier --byteps-env BENCH_FLAT_PRIORITY=1
  [ $(( $(date +%s) - T0 )) -lt 470 ] || break
  run resnet50_plain_$rep resnet50
  run resnet50_cb_$rep resnet50 --cross-barrier
  [ $(( $(date +%s) - T0 )) -lt 500 ] || break
done
tar -C /tmp/runs -czf $OUT/runs.tgz .
el done
