#!/usr/bin/env bash
# Session 7 (one H200), issue 38: the final tree's pytest tests/gpu (host
# functions inline, copy-ahead bound), then an A/B of per-kind notify
# streams (BYTEPS_GPU_NOTIFY_STREAM=1) against inline.
set -o pipefail
rm -rf /tmp/w && cp -r . /tmp/w && cd /tmp/w || exit 1
export BYTEPS_TIMEOUT=30 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
OUT=/tmp/build scripts/gpu_suite.sh --build-only > /tmp/build.txt 2>&1 || { tail -40 /tmp/build.txt; cp /tmp/build.txt $OUT/; exit 1; }
el built
timeout -s TERM 200 python3 -m pytest -q -rs tests/gpu -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
el "gpu tests rc $?"; grep -E "passed|failed|FAILED|Error" $OUT/gpu_tests.txt | tail -15
source scripts/gpu_netns_tools.sh .gpu-tools/iproute2-debs > /tmp/netns.txt 2>&1
mkdir -p /tmp/runs
for spec in vgg16:25gbit resnet50:10gbit; do
  for notify in 1 0; do
    IFS=: read -r model rate <<< "$spec"
    name=${model}_${rate}_notify${notify}
    timeout -s TERM 60 python3 benchmarks/gpu_ddp.py --gpus 2 --machines 2 --shaped $rate \
      --models $model --steps 10 --warmup 4 --byteps-only --byteps-env BYTEPS_GPU_NOTIFY_STREAM=$notify \
      --json /tmp/runs/$name.json > /tmp/runs/$name.txt 2>&1
    el "$name rc $?"
    grep -E "inside a step" /tmp/runs/$name.txt | tail -1
  done
done
tar -C /tmp/runs -czf $OUT/runs.tgz .
