#!/usr/bin/env bash
# The whole GPU suite on a GPU machine: CUDA build, tests/gpu and the C++
# suites over NCCL (tests/cpp/gpu), benchmarks.
#
#   scripts/gpu_suite.sh                 # build + tests + benchmarks
#   scripts/gpu_suite.sh --no-bench      # build + tests
#   scripts/gpu_suite.sh --bench-only    # build + benchmarks
#   scripts/gpu_suite.sh --build-only    # build + info (then run what you need)
#   GPU_SUITE_PYTEST_ARGS="-k cupy" scripts/gpu_suite.sh --no-bench
#
# Logs go to $OUT (the device tool's folder) or out/gpu/. Exits non-zero when
# the engine's capabilities lack CUDA or a test fails.
set -uo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
LOG="${OUT:-$REPO/out/gpu}"
mkdir -p "$LOG"
PY="${PYTHON:-python3}"
RUN_TESTS=1
RUN_BENCH=1
for arg in "$@"; do
  case "$arg" in
    --no-bench) RUN_BENCH=0 ;;
    --bench-only) RUN_TESTS=0 ;;
    --build-only) RUN_TESTS=0; RUN_BENCH=0 ;;
    *) echo "unknown option $arg" >&2; exit 2 ;;
  esac
done

# NVLink multicast stays off on shared hosts (it can take the GPUs down).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

# The engine and the Python extensions must share the process's C++ runtime,
# so everything is built with the compilers Python was built with
# (sysconfig's CC and CXX), whatever CC/CXX the environment holds: the GPU
# machines' image exports CC=/opt/gcc/bin/gcc CXX=/opt/gcc/bin/g++, a GCC that
# links libstdc++ statically. The engine then carried a private libstdc++
# whose iostreams were never initialised, while numpy had already loaded the
# shared one, and its first `ostream << long` (the CUDA build_info) crashed:
# `python -m byteps_native.info` died with SIGSEGV. BYTEPS_CC/BYTEPS_CXX
# override. Given to the build command only.
py_compiler() { "$PY" -c "import sysconfig; print(sysconfig.get_config_var('$1').split()[0])"; }
BUILD_CC="${BYTEPS_CC:-$(py_compiler CC)}"
BUILD_CXX="${BYTEPS_CXX:-$(py_compiler CXX)}"

start=$(date +%s)
echo "== build (CUDA) with CC=$BUILD_CC CXX=$BUILD_CXX ($(command -v "$BUILD_CXX"))"
# Verbose into the log: the compile and link lines are the first thing to
# read when the build misbehaves on a new image.
if ! CC="$BUILD_CC" CXX="$BUILD_CXX" BYTEPS_WITH_CUDA=1 "$PY" -m pip install -v --no-build-isolation --no-deps -e . \
    >"$LOG/build.log" 2>&1; then
  tail -60 "$LOG/build.log"
  exit 1
fi
# A C++ library without libstdc++.so.6 among its needed libraries has its own
# static copy: refuse it here, with the cause, rather than crash later.
for lib in byteps_native/lib/libbyteps_engine.so byteps_native/core/_core*.so byteps_native/torch/_c10d*.so; do
  if ! readelf -d "$lib" | grep -q 'NEEDED.*libstdc++'; then
    echo "$lib does not link the shared libstdc++ (a static copy inside?); built with CXX=$BUILD_CXX." \
      "Set BYTEPS_CXX to a compiler that links libstdc++ dynamically." >&2
    exit 1
  fi
done
export PYTHONUNBUFFERED=1
if ! "$PY" -X faulthandler -m byteps_native.info >"$LOG/info.txt" 2>"$LOG/info.err"; then
  echo "python -m byteps_native.info failed:"
  tail -40 "$LOG/info.err"
  for lib in byteps_native/lib/libbyteps_engine.so byteps_native/core/_core*.so byteps_native/torch/_c10d*.so; do
    echo "$lib:"; ldd "$lib" | grep -E "stdc\+\+|gcc_s|cudart|nccl|not found"
  done
  exit 1
fi
cat "$LOG/info.txt"
# The engine's capability bits, not its human-readable build text (issue 40).
"$PY" -c "from byteps_native._runtime import library; import sys; sys.exit(0 if library.capabilities()['cuda'] else 1)" \
  || { echo "engine built without CUDA (capabilities: no cuda)"; exit 1; }
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader | tee -a "$LOG/info.txt"
echo "build: $(( $(date +%s) - start )) s"

status=0
if [ "$RUN_TESTS" = 1 ]; then
  echo "== tests/gpu"
  # shellcheck disable=SC2086
  "$PY" -m pytest -q -rs tests/gpu ${GPU_SUITE_PYTEST_ARGS:-} 2>&1 | tee "$LOG/tests.log"
  status=${PIPESTATUS[0]}
  echo "== tests/cpp/gpu (the C++ suites over NCCL)"
  # GoogleTest: installed, else sources in $BPS_GTEST_SOURCE (e.g. a copy of
  # a Debian machine's /usr/src/googletest carried into the tree).
  # shellcheck disable=SC2086
  CC="$BUILD_CC" CXX="$BUILD_CXX" scripts/gpu_cpp_tests.sh ${BPS_GTEST_SOURCE:-} 2>&1 | tee "$LOG/cpp_gpu.log" |
    grep -E "^\[  (PASSED|FAILED)|own order on NCCL"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  echo "tests: $(( $(date +%s) - start )) s"
fi

if [ "$RUN_BENCH" = 1 ]; then
  echo "== benchmarks"
  ngpu=$(nvidia-smi -L | wc -l)
  "$PY" benchmarks/gpu_push_pull.py --json "$LOG/gpu_push_pull_1m.json" 2>&1 | tee "$LOG/bench.log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  if [ "$ngpu" -ge 2 ]; then
    "$PY" benchmarks/gpu_push_pull.py --machines 2 --json "$LOG/gpu_push_pull_2m.json" 2>&1 | tee -a "$LOG/bench.log"
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
  fi
  echo "push_pull benchmarks: $(( $(date +%s) - start )) s"
  # shellcheck disable=SC2086
  "$PY" benchmarks/gpu_ddp.py ${GPU_SUITE_BENCH_ARGS:-} --json "$LOG/gpu_ddp.json" 2>&1 | tee -a "$LOG/bench.log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  echo "benchmarks: $(( $(date +%s) - start )) s"
fi
exit "$status"
