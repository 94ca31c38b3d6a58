#!/usr/bin/env bash
# Session 7 (one H200), issue 38: where the device path's 16-18 ms per
# 256 MiB goes. (1) the copy pattern alone (benchmarks/gpu_copy_pipeline_probe.cu);
# (2) the data path at 25 Gbit/s and unshaped (100gbit) with the engine's
# new counters (passes, device issue) per worker; (3) a timeline of one op.
set -o pipefail
rm -rf /tmp/w && cp -r . /tmp/w && cd /tmp/w || exit 1
export BYTEPS_TIMEOUT=30 PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
( nvcc -std=c++17 -O2 benchmarks/gpu_copy_pipeline_probe.cu -o /tmp/gcp && timeout 60 /tmp/gcp ) > $OUT/probe.txt 2>&1
el "probe rc $?"; cat $OUT/probe.txt
OUT=/tmp/build scripts/gpu_suite.sh --build-only > /tmp/build.txt 2>&1 || { tail -40 /tmp/build.txt; exit 1; }
el built
source scripts/gpu_netns_tools.sh .gpu-tools/iproute2-debs > /tmp/netns.txt 2>&1
mkdir -p /tmp/trace
for rate in 25gbit 100gbit; do
  timeout -s TERM 150 python3 benchmarks/multihost.py --n 2 --rate $rate --burst 32mbit --size-mb 256 --reps 2 \
    --modes dedicated --variant p1m BYTEPS_PARTITION_BYTES=1024000 \
    --variant gpu0_p1m BENCH_DEVICE=cuda BENCH_DEVICE_WORKERS=0 BYTEPS_PARTITION_BYTES=1024000 \
    --json $OUT/stats_$rate.json > $OUT/stats_$rate.txt 2>&1
  el "$rate rc $?"; tail -12 $OUT/stats_$rate.txt
done
timeout -s TERM 100 python3 benchmarks/multihost.py --n 2 --rate 25gbit --burst 32mbit --size-mb 256 --reps 1 \
  --modes dedicated --variant gpu0tr BENCH_DEVICE=cuda BENCH_DEVICE_WORKERS=0 BYTEPS_PARTITION_BYTES=1024000 \
  BYTEPS_TRACE_ON=1 BYTEPS_TRACE_DIR=/tmp/trace BYTEPS_TRACE_START_STEP=4 BYTEPS_TRACE_END_STEP=4 \
  > $OUT/trace_run.txt 2>&1
el "trace rc $?"; tail -4 $OUT/trace_run.txt; ls -la /tmp/trace
tar czf $OUT/trace.tgz -C /tmp trace
