#!/usr/bin/env bash
# The C++ suites over NCCL (tests/cpp/gpu) on a GPU machine: the sequenced
# reducer's conformance cases and the ordering rule's engine test, with the
# CUDA and NCCL the Python build finds (build_tools/frameworks.py).
#
#   scripts/gpu_cpp_tests.sh [GTEST_SOURCE_DIR] [gtest args, no filter...]
# GTEST_SOURCE_DIR: GoogleTest's sources where none is installed (the GPU
# machine: copy /usr/src/googletest of a Debian machine into the tree).
set -euo pipefail
cd "$(dirname "$0")/.."
gtest_source=""
if [ $# -gt 0 ] && [ -d "$1" ]; then gtest_source="$(cd "$1" && pwd)"; shift; fi
PY="${PYTHON:-python3}"
flags=$(BYTEPS_WITH_CUDA=1 "$PY" -c '
import sys
sys.path.insert(0, ".")
from build_tools import frameworks
import os, sysconfig
c = frameworks.cuda_config()
host = os.environ.get("CXX") or sysconfig.get_config_var("CXX").split()[0]
print(" ".join(c["cflags"]) + "|" + " ".join(c["libs"]) + "|" + c["nvcc"] + "|" +
      " ".join(frameworks.nvcc_flags(host, os.path.abspath("csrc"))))' | tail -1)
IFS="|" read -r cuda_cflags cuda_libs nvcc nvcc_flags <<<"$flags"
build="${BPS_GPU_CPP_BUILD:-build/cpp-cuda}"
cmake -S tests/cpp -B "$build" -DBPS_WITH_CUDA=ON -DBPS_GTEST_SOURCE="$gtest_source" \
  -DBPS_CUDA_CFLAGS="$cuda_cflags" -DBPS_CUDA_LIBS="$cuda_libs" -DBPS_NVCC="$nvcc" -DBPS_NVCC_FLAGS="$nvcc_flags" \
  >/dev/null
cmake --build "$build" -- -j"$(nproc)" bps_gpu_tests >/dev/null
# The old scheduling's stall runs alone: NCCL given mismatched calls is
# undefined, and must not take the other cases' device state with it.
rc=0
timeout 600 "$build/bps_gpu_tests" --gtest_filter=-NcclEngineOwnOrder.* "$@" || rc=$?
timeout 300 "$build/bps_gpu_tests" --gtest_filter=NcclEngineOwnOrder.* "$@" || rc=$?
exit $rc
