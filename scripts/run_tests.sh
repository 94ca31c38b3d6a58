#!/usr/bin/env bash
# Install, then run the whole test suite (real processes, real sockets).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install.sh
exec python3 -m pytest -q -rs tests "$@"
