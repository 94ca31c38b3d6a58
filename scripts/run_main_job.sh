#!/usr/bin/env bash
# The main job: install, then train a small CNN on scikit-learn's digits with
# DDP over the byteps backend, 2 CPU processes on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install.sh
exec torchrun --standalone --nproc_per_node 2 examples/torch/ddp_digits.py "$@"
