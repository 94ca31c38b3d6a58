#!/usr/bin/env bash
# Session 7 (one H200), issue 38: A/B in one call of the notify stream
# (BYTEPS_GPU_NOTIFY_STREAM=1, default, against 0: host functions on the
# copy/NCCL streams as before), both with the copy-ahead bound; interleaved.
set -o pipefail
rm -rf /tmp/w && cp -r . /tmp/w && cd /tmp/w || exit 1
export BYTEPS_TIMEOUT=30 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
OUT=/tmp/build scripts/gpu_suite.sh --build-only > /tmp/build.txt 2>&1 || { tail -40 /tmp/build.txt; cp /tmp/build.txt $OUT/; exit 1; }
el built
source scripts/gpu_netns_tools.sh .gpu-tools/iproute2-debs > /tmp/netns.txt 2>&1
timeout -s TERM 120 python3 benchmarks/multihost.py --n 2 --rate 25gbit --burst 32mbit --size-mb 256 --reps 2 \
  --modes dedicated --variant gpu0_notify BENCH_DEVICE=cuda BENCH_DEVICE_WORKERS=0 BYTEPS_PARTITION_BYTES=1024000 \
  --variant gpu0_inline BENCH_DEVICE=cuda BENCH_DEVICE_WORKERS=0 BYTEPS_PARTITION_BYTES=1024000 BYTEPS_GPU_NOTIFY_STREAM=0 \
  --json $OUT/data_path_25gbit.json > $OUT/data_path_25gbit.txt 2>&1
el "data path rc $?"; tail -5 $OUT/data_path_25gbit.txt
mkdir -p /tmp/runs
for rep in 1 2; do
  for spec in vgg16:25gbit resnet50:10gbit; do
    for notify in 1 0; do
      IFS=: read -r model rate <<< "$spec"
      name=${model}_${rate}_notify${notify}_rep$rep
      timeout -s TERM 100 python3 benchmarks/gpu_ddp.py --gpus 2 --machines 2 --shaped $rate \
        --models $model --steps 10 --warmup 4 --byteps-only --byteps-env BYTEPS_GPU_NOTIFY_STREAM=$notify \
        --json /tmp/runs/$name.json > /tmp/runs/$name.txt 2>&1
      el "$name rc $?"
      grep -E "inside a step" /tmp/runs/$name.txt | tail -1
    done
  done
done
tar -C /tmp/runs -czf $OUT/runs.tgz .
