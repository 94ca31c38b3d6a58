#!/usr/bin/env bash
# Session 7: pytest tests/gpu on e5b178e (the wakeup changes), as much as the budget allows.
rm -rf /tmp/w && cp -r . /tmp/w && cd /tmp/w || exit 1
export BYTEPS_TIMEOUT=30 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
OUT=/tmp/build scripts/gpu_suite.sh --build-only > /tmp/build.txt 2>&1 || { tail -20 /tmp/build.txt; exit 1; }
echo built
timeout -s TERM 110 python3 -m pytest -q -rs tests/gpu -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "rc $?"; grep -E "passed|failed|FAILED|Error" $OUT/gpu_tests.txt | tail -8; tail -3 $OUT/gpu_tests.txt
