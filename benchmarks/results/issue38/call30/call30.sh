#!/usr/bin/env bash
# Session 7 (one H200), issue 38: host functions on a stream of their own
# (notify), with the copy-ahead bound of call29: the data path, the models
# byteps-only on the shared GPU (compare call29), then pytest tests/gpu.
set -o pipefail
rm -rf /tmp/w && cp -r . /tmp/w && cd /tmp/w || exit 1
export BYTEPS_TIMEOUT=30 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
OUT=/tmp/build scripts/gpu_suite.sh --build-only > /tmp/build.txt 2>&1 || { tail -40 /tmp/build.txt; cp /tmp/build.txt $OUT/; exit 1; }
el built
source scripts/gpu_netns_tools.sh .gpu-tools/iproute2-debs > /tmp/netns.txt 2>&1
timeout -s TERM 120 python3 benchmarks/multihost.py --n 2 --rate 25gbit --burst 32mbit --size-mb 256 --reps 2 \
  --modes dedicated --variant p1m BYTEPS_PARTITION_BYTES=1024000 \
  --variant gpu0 BENCH_DEVICE=cuda BENCH_DEVICE_WORKERS=0 BYTEPS_PARTITION_BYTES=1024000 \
  --variant gpu BENCH_DEVICE=cuda \
  --json $OUT/data_path_25gbit.json > $OUT/data_path_25gbit.txt 2>&1
el "data path rc $?"; tail -6 $OUT/data_path_25gbit.txt
mkdir -p /tmp/runs
for spec in vgg16:25gbit resnet50:25gbit bert_large:25gbit vgg16:10gbit resnet50:10gbit; do
  IFS=: read -r model rate <<< "$spec"
  name=${model}_${rate}
  timeout -s TERM 100 python3 benchmarks/gpu_ddp.py --gpus 2 --machines 2 --shaped $rate \
    --models $model --steps 10 --warmup 4 --byteps-only --json /tmp/runs/$name.json > /tmp/runs/$name.txt 2>&1
  el "$name rc $?"
  grep -E "used|inside a step|byteps +[0-9]" /tmp/runs/$name.txt | tail -4
done
tar -C /tmp/runs -czf $OUT/runs.tgz .
timeout -s TERM 250 python3 -m pytest -q -rs tests/gpu -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
el "gpu tests rc $?"; grep -E "passed|failed|FAILED|Error" $OUT/gpu_tests.txt | tail -15
