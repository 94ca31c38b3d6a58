# shellcheck shell=bash
# Sourced by install.sh, run_tests.sh and run_main_job.sh: picks the Python
# that byteps-native is installed into and sets $PY to it.
#
#   $PYTHON       the interpreter to start from (default python3). If it already
#                 runs in a virtualenv, that virtualenv is used as is.
#   $BYTEPS_VENV  otherwise a virtualenv is made here (default .venv in the
#                 source tree) and used: a system Python on Debian refuses pip
#                 installs (PEP 668 "externally-managed-environment").
#
# The virtualenv sees the base interpreter's packages (--system-site-packages):
# frameworks installed there (pyenv, a CI image) are reused, not downloaded again.
PYTHON="${PYTHON:-python3}"
if ! command -v "$PYTHON" >/dev/null; then
  echo "byteps-native: no Python interpreter '$PYTHON'; install python3 (apt-get install python3 python3-venv) or set PYTHON" >&2
  exit 1
fi
if "$PYTHON" -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; then
  PY="$(command -v "$PYTHON")"
else
  BYTEPS_VENV="${BYTEPS_VENV:-$PWD/.venv}"
  if [ ! -x "$BYTEPS_VENV/bin/python" ]; then
    if ! "$PYTHON" -m venv --system-site-packages "$BYTEPS_VENV"; then
      echo "byteps-native: '$PYTHON -m venv' failed; on Debian/Ubuntu: apt-get install python3-venv" >&2
      exit 1
    fi
  fi
  PY="$BYTEPS_VENV/bin/python"
fi
# bpslaunch, torchrun and the tests' subprocesses come from the same environment.
PATH="$(dirname "$PY"):$PATH"
export PATH
export PY
