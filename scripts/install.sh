#!/usr/bin/env bash
# Installs everything byteps-native needs on a fresh Debian machine (system
# Python or pyenv, 3.9+) into a virtualenv (scripts/python_env.sh) and builds
# it in place: engine, pybind core, torch backend, TF ops. Re-running it, in this
# tree or a fresh clone of the same sources, compiles nothing (the build cache,
# $BYTEPS_BUILD_CACHE, keeps objects and extensions by content).
#
#   ./scripts/install.sh            # CPU frameworks (requirements.txt)
#   BYTEPS_GPU=1 ./scripts/install.sh   # CUDA torch + TensorFlow (requirements-gpu.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  # iproute2: multi-host tests in network namespaces; clang: the fuzz smoke test;
  # python3-venv: virtualenvs with Debian's Python.
  missing=""
  command -v ip >/dev/null || missing="$missing iproute2"
  command -v clang++ >/dev/null || missing="$missing clang"
  # libFuzzer and the sanitizer runtimes: only a Recommends of clang.
  compgen -G "/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a" >/dev/null ||
    missing="$missing libclang-rt-dev"
  command -v g++ >/dev/null || missing="$missing g++"
  command -v cmake >/dev/null && [ -f /usr/include/gtest/gtest.h ] || missing="$missing cmake libgtest-dev"  # tests/cpp
  command -v ccache >/dev/null || missing="$missing ccache"  # tests/cpp's (sanitizer) builds across fresh clones
  "${PYTHON:-python3}" -c 'import ensurepip, venv' 2>/dev/null || missing="$missing python3-venv"
  # A one-node Slurm cluster for tests/packaging/test_slurm.py (sbatch recipe).
  command -v slurmctld >/dev/null || missing="$missing slurmctld slurmd slurm-client munge"
  if [ -n "$missing" ]; then
    # No Recommends: clang's pull in llvm-14-dev (~270 MB installed), which nothing here uses.
    # shellcheck disable=SC2086
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing \
      >/dev/null  # word splitting wanted
  fi
fi
# shellcheck source=scripts/python_env.sh
source scripts/python_env.sh
requirements=requirements.txt
if [ "${BYTEPS_GPU:-0}" = 1 ]; then requirements="requirements-gpu.txt"; fi
"$PY" -m pip install -q -r "$requirements"
# Without their dependencies (requirements-nodeps.txt says why).
"$PY" -m pip install -q --no-deps -r requirements-nodeps.txt
# No build isolation: the extensions compile against the installed torch/TensorFlow.
# The build cache (~/.cache/byteps-native, keyed by content) is shared by every
# clone on this machine: CI clones afresh each run.
"$PY" -m pip install -q --no-build-isolation -e .
"$PY" -m byteps_native.info
echo "byteps-native installed into $("$PY" -c 'import sys; print(sys.prefix)'); use it with: source $(dirname "$PY")/activate"
