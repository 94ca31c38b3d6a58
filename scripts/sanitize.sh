#!/usr/bin/env bash
# Builds the C++ tests (tests/cpp) and the engine sources they link under
# sanitizers, runs every GoogleTest case, then a small job of 4 processes
# (scheduler, server, 2 workers: tests/cpp/role_smoke_main.cc) that checks
# its sums and a deliberate mismatch. Fails on any sanitizer report.
#
#   scripts/sanitize.sh asan     # AddressSanitizer + UndefinedBehaviorSanitizer (build/asan)
#   scripts/sanitize.sh tsan     # ThreadSanitizer (build/tsan)
#   GTEST_FILTER='Wire*' scripts/sanitize.sh asan    # a subset of the tests
#
# Needs cmake, libgtest-dev and a compiler with the sanitizer runtimes
# (g++ 12 or clang 14 here; CXX picks it). Reports go to build/<kind>/reports.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KIND="${1:-asan}"
case "$KIND" in
  asan) SANITIZE="address,undefined" ;;
  tsan) SANITIZE="thread" ;;
  *) echo "usage: $0 asan|tsan" >&2; exit 2 ;;
esac
BUILD="$ROOT/build/$KIND"
REPORTS="$BUILD/reports"
mkdir -p "$REPORTS"
rm -f "$REPORTS"/*

cmake -S "$ROOT/tests/cpp" -B "$BUILD" -DBPS_SANITIZE="$SANITIZE" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
cmake --build "$BUILD" -- -j"${JOBS:-2}" >"$BUILD/build.log" 2>&1 || { tail -40 "$BUILD/build.log"; exit 1; }
# With ccache (tests/cpp/CMakeLists.txt) a later fresh clone rebuilds this
# kind from the cache in seconds: tests/cpp/test_sanitizers.py reads the stamp.
if command -v ccache >/dev/null; then
  stamps="${BYTEPS_BUILD_CACHE:-$HOME/.cache/byteps-native}/sanitizers"
  mkdir -p "$stamps" && touch "$stamps/$KIND-in-ccache"
fi

# Reports go to files (one per process) so a child's report is never lost.
export ASAN_OPTIONS="detect_leaks=1:log_path=$REPORTS/asan:abort_on_error=0"
export UBSAN_OPTIONS="print_stacktrace=1:log_path=$REPORTS/ubsan"
# Proven-benign races only, each with its proof: tests/cpp/tsan_suppressions.txt.
export TSAN_OPTIONS="log_path=$REPORTS/tsan:second_deadlock_stack=1:history_size=4:suppressions=$ROOT/tests/cpp/tsan_suppressions.txt"

status=0
echo "== $KIND: GoogleTest cases"
"$BUILD/bps_cpp_tests" --gtest_brief=1 ${GTEST_FILTER:+--gtest_filter="$GTEST_FILTER"} >"$BUILD/gtest.log" 2>&1
rc=$?
grep -E "^\[  (PASSED|FAILED)" "$BUILD/gtest.log"
[[ $rc -eq 0 ]] || { echo "gtest exit status $rc"; status=1; }

echo "== $KIND: a job of 4 processes"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=$port DMLC_INTERFACE=lo DMLC_NUM_WORKER=2 DMLC_NUM_SERVER=1 \
  BYTEPS_JOB_TOKEN=sanitize-$RANDOM$RANDOM BYTEPS_TIMEOUT=60 BYTEPS_PARTITION_BYTES=65536
pids=()
DMLC_ROLE=scheduler "$BUILD/bps_role_smoke" >"$BUILD/smoke-scheduler.log" 2>&1 & pids+=($!)
DMLC_ROLE=server "$BUILD/bps_role_smoke" >"$BUILD/smoke-server.log" 2>&1 & pids+=($!)
for w in 0 1; do
  DMLC_ROLE=worker DMLC_WORKER_ID=$w "$BUILD/bps_role_smoke" 40 >"$BUILD/smoke-worker$w.log" 2>&1 & pids+=($!)
done
for pid in "${pids[@]}"; do
  # Bounded: a hang is a failure, not a stuck script.
  for _ in $(seq 1 1800); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then echo "process $pid still running after 180 s"; kill -9 "$pid"; status=1; fi
  wait "$pid" || { echo "process $pid exited with $?"; status=1; }
done
grep -h "SMOKE" "$BUILD"/smoke-worker*.log

# UBSan next to ASan prints to stderr (the logs), the rest to report files.
reports=$(ls "$REPORTS" 2>/dev/null | wc -l)
findings=$(cat "$REPORTS"/* "$BUILD"/gtest.log "$BUILD"/smoke-*.log 2>/dev/null |
           grep -E "^(SUMMARY: |WARNING: ThreadSanitizer|.*runtime error: )" | sed 's/0x[0-9a-f]*/0x…/g')
if [[ -n "$findings" ]]; then
  echo "== sanitizer findings ($reports report file(s) in $REPORTS; the rest in $BUILD/*.log):"
  echo "$findings" | sort | uniq -c | sort -rn | head -40
  status=1
fi
[[ $status -eq 0 ]] && echo "== $KIND: clean" || echo "== $KIND: FINDINGS (see above)"
exit $status
