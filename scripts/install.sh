#!/usr/bin/env bash
# Installs everything byteps-native needs on a fresh Debian machine with
# Python 3.11 and builds it in place (engine, pybind core, torch backend, TF ops).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  # iproute2: multi-host tests in network namespaces; clang: the fuzz smoke test.
  missing=""
  command -v ip >/dev/null || missing="$missing iproute2"
  command -v clang++ >/dev/null || missing="$missing clang"
  command -v g++ >/dev/null || missing="$missing g++"
  command -v cmake >/dev/null && [ -f /usr/include/gtest/gtest.h ] || missing="$missing cmake libgtest-dev"  # tests/cpp
  if [ -n "$missing" ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
  fi
fi
"$PYTHON" -m pip install -q -r requirements.txt
# No build isolation: the extensions must see the installed torch/TensorFlow.
"$PYTHON" -m pip install -q --no-build-isolation -e .
"$PYTHON" -m byteps_native.info >/dev/null 2>&1 || true
