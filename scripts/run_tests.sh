#!/usr/bin/env bash
# Install (scripts/install.sh, honouring $PYTHON), then run the whole test
# suite (real processes, real sockets) with that environment's Python.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install.sh
# shellcheck source=scripts/python_env.sh
source scripts/python_env.sh
exec "$PY" -m pytest -q -rs tests "$@"
