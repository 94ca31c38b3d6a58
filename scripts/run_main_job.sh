#!/usr/bin/env bash
# The main job: install, then train a small CNN on scikit-learn's digits with
# DDP over the byteps backend, 2 CPU processes on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install.sh
# shellcheck source=scripts/python_env.sh
source scripts/python_env.sh
# torchrun sets 1 itself, with a banner asking the user to tune it: the same
# value, set here, without the banner (the job's processes share the CPUs).
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
exec "$PY" -m torch.distributed.run --standalone --nproc_per_node 2 -m byteps_native.examples.ddp_digits "$@"
