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
# The virtualenv sees only what the project's requirement files install into
# it, not the base interpreter's packages: with --system-site-packages, CI
# passed on machines where a package no project file declares had been
# installed by hand, and failed on a fresh one (issue 27). pip's cache (and a
# local wheel of torch, where the machine has one) keeps the install fast.
# A virtualenv an earlier version made with --system-site-packages is switched
# to isolation in place (pyvenv.cfg); the next pip install fills in what it lacked.
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
    if ! "$PYTHON" -m venv "$BYTEPS_VENV"; then
      echo "byteps-native: '$PYTHON -m venv' failed; on Debian/Ubuntu: apt-get install python3-venv" >&2
      exit 1
    fi
  elif grep -qs '^include-system-site-packages *= *true' "$BYTEPS_VENV/pyvenv.cfg"; then
    sed -i 's/^include-system-site-packages *= *true/include-system-site-packages = false/' "$BYTEPS_VENV/pyvenv.cfg"
  fi
  PY="$BYTEPS_VENV/bin/python"
fi
# bpslaunch, torchrun and the tests' subprocesses come from the same environment.
PATH="$(dirname "$PY"):$PATH"
export PATH
export PY
