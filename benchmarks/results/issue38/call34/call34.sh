#!/usr/bin/env bash
# Session 8 (one H200), issue 38. B = this tree: a partition's pushes planned
# once and refused partitions left untouched in a pass; CUDA host functions
# ring only their own engine (MachineLink::ring_self). A = ba4cc49.
# tests/gpu on B, then A/B pairs on the shared GPU (byteps only, both
# emulated machines on the one GPU, as calls 22-33) until the time is spent.
set -o pipefail
rm -rf /tmp/w && cp -r . /tmp/w && cd /tmp/w || exit 1
export BYTEPS_TIMEOUT=30 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
OUT=/tmp/build scripts/gpu_suite.sh --build-only > /tmp/build.txt 2>&1 || { tail -40 /tmp/build.txt; exit 1; }
el "built B"
PYCXX=$(python3 -c "import sysconfig; print(sysconfig.get_config_var('CXX').split()[0])")
PYCC=$(python3 -c "import sysconfig; print(sysconfig.get_config_var('CC').split()[0])")
rm -rf /tmp/wA && mkdir -p /tmp/wA && tar -xzf .gpu-tools/tree_A.tgz -C /tmp/wA
(cd /tmp/wA && CC=$PYCC CXX=$PYCXX BYTEPS_WITH_CUDA=1 BYTEPS_WITH_TENSORFLOW=0 python3 setup.py -q build_ext --inplace) > $OUT/buildA.txt 2>&1 || { tail -30 $OUT/buildA.txt; }
(cd / && PYTHONPATH=/tmp/wA python3 -c "import byteps_native, byteps_native.torch; from byteps_native._runtime import library; print('A ->', byteps_native.__file__, library.capabilities()['cuda'])")
(cd / && python3 -c "import byteps_native; print('B ->', byteps_native.__file__)")
el "built A"
timeout -s TERM 130 python3 -m pytest -q -rs tests/gpu -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
el "tests/gpu rc $?"; grep -E "passed|failed|FAILED|Error" $OUT/gpu_tests.txt | tail -8
source scripts/gpu_netns_tools.sh .gpu-tools/iproute2-debs > /tmp/netns.txt 2>&1
mkdir -p /tmp/runs
run() {  # side model rate rep
  local side=$1 model=$2 rate=$3 rep=$4 tree=/tmp/w pp=
  if [ "$side" = A ]; then tree=/tmp/wA; pp=/tmp/wA; fi
  local name=${model}_${rate}_${side}_$rep
  (cd $tree && PYTHONPATH=$pp timeout -s TERM 100 python3 benchmarks/gpu_ddp.py --gpus 2 --machines 2 --shaped $rate \
    --models $model --steps 10 --warmup 4 --byteps-only --json /tmp/runs/$name.json > /tmp/runs/$name.txt 2>&1)
  el "$name rc $?"; grep -E "used|inside a step|byteps +[0-9]" /tmp/runs/$name.txt | tail -3
}
rep=0
while [ $(( $(date +%s) - T0 )) -lt 470 ]; do
  rep=$((rep + 1))
  if [ $((rep % 2)) = 1 ]; then order="A B"; else order="B A"; fi
  for side in $order; do run $side vgg16 25gbit $rep; done
  [ $(( $(date +%s) - T0 )) -lt 500 ] || break
  for side in $order; do run $side resnet50 10gbit $rep; done
done
tar -C /tmp/runs -czf $OUT/runs.tgz .
el done
