"""Horovod and BytePS API compatibility: our own API tests (workers/), the
upstream example scripts ported by their import line (third_party/, run by
run_scripts.py) and the upstream unit-test suites (third_party/, run by
upstream/run_upstream.py)."""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
WORKERS = os.path.join(HERE, "workers")
