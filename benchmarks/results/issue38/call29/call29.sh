#!/usr/bin/env bash
# Session 7 (one H200), issue 38: call28 found the engine thread 14-16 ms per
# 256 MiB op inside device->Progress() (queueing the copies). A/B of the
# copy-ahead bound (BYTEPS_DEVICE_COPY_AHEAD_BYTES, default 16 MiB; 0 = the
# old unbounded issue): the data path, then VGG-16/ResNet-50 byteps-only on
# the shared GPU (both machines on it, as calls 22-25).
set -o pipefail
rm -rf /tmp/w && cp -r . /tmp/w && cd /tmp/w || exit 1
export BYTEPS_TIMEOUT=30 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
( nvcc -std=c++17 -O2 benchmarks/gpu_copy_pipeline_probe.cu -o /tmp/gcp && timeout 60 /tmp/gcp ) > $OUT/probe.txt 2>&1
el "probe rc $?"; cat $OUT/probe.txt
OUT=/tmp/build scripts/gpu_suite.sh --build-only > /tmp/build.txt 2>&1 || { tail -40 /tmp/build.txt; exit 1; }
el built
source scripts/gpu_netns_tools.sh .gpu-tools/iproute2-debs > /tmp/netns.txt 2>&1
timeout -s TERM 120 python3 benchmarks/multihost.py --n 2 --rate 25gbit --burst 32mbit --size-mb 256 --reps 2 \
  --modes dedicated --variant p1m BYTEPS_PARTITION_BYTES=1024000 \
  --variant gpu0 BENCH_DEVICE=cuda BENCH_DEVICE_WORKERS=0 BYTEPS_PARTITION_BYTES=1024000 \
  --variant gpu0_unbounded BENCH_DEVICE=cuda BENCH_DEVICE_WORKERS=0 BYTEPS_PARTITION_BYTES=1024000 BYTEPS_DEVICE_COPY_AHEAD_BYTES=0 \
  --json $OUT/data_path_25gbit.json > $OUT/data_path_25gbit.txt 2>&1
el "data path rc $?"; tail -6 $OUT/data_path_25gbit.txt
mkdir -p /tmp/runs
for spec in vgg16:25gbit:default vgg16:25gbit:BYTEPS_DEVICE_COPY_AHEAD_BYTES=0 vgg16:10gbit:default \
            vgg16:10gbit:BYTEPS_DEVICE_COPY_AHEAD_BYTES=0 resnet50:10gbit:default resnet50:10gbit:BYTEPS_DEVICE_COPY_AHEAD_BYTES=0; do
  IFS=: read -r model rate envs <<< "$spec"
  envarg=(); tag=default
  if [ "$envs" != default ]; then
    tag=$(echo "$envs" | tr ',=' '_-')
    for kv in ${envs//,/ }; do envarg+=(--byteps-env "$kv"); done
  fi
  name=${model}_${rate}_$tag
  timeout -s TERM 100 python3 benchmarks/gpu_ddp.py --gpus 2 --machines 2 --shaped $rate \
    --models $model --steps 10 --warmup 4 --byteps-only "${envarg[@]}" \
    --json /tmp/runs/$name.json > /tmp/runs/$name.txt 2>&1
  el "$name rc $?"
  grep -E "used|inside a step|byteps +[0-9]" /tmp/runs/$name.txt | tail -4
done
tar -C /tmp/runs -czf $OUT/runs.tgz .
